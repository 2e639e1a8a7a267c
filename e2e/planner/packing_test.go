package planner

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// packingJobspec is the test's trainer: a MODELLED GPU profile whose
// compute slows down on a shared simulated GPU, steered onto a GPU by a
// device affinity.
const packingJobspec = "e2e/planner/testdata/packing-train.nomad.hcl"

// packingInterval is the planner's round interval in these tests
// (startPlanner's policy block).
const packingInterval = 3 * time.Second

// packingAgent starts a standalone agent with three SIMULATED GPUs of four
// shares, time-sliced (no mps block: mps = false), whose occupancy files
// (state_dir) the trainers' modelled compute reads.
func packingAgent(t *testing.T, c *harness.C) *harness.Agent {
	t.Helper()
	a := harness.NewAgent(t, c, "packing", 3)
	gpu := `
  gpu {
    model      = "NVIDIA A100-SXM4-40GB"
    memory_mib = 40960
  }`
	dev := fmt.Sprintf(`backend = "simulated"
shares  = 4
simulated {
  seed      = %q
  state_dir = %q
%s%s%s
}`, a.Dir, filepath.Join(a.Dir, "gpu-state"), gpu, gpu, gpu)
	drv := fmt.Sprintf("enabled = true\ncheckpoint_store = %q\nnomad_address = %q", a.C.CheckpointDir, a.C.NomadAddr)
	a.Start(t, a.PluginConfig(dev, drv))
	a.WaitNode(t, 2*time.Minute)
	return a
}

// gpusView is GET /v1/gpus as the test reads it.
type gpusView struct {
	Packing struct {
		GPUs []struct {
			ID   string   `json:"id"`
			MPS  bool     `json:"mps"`
			Gain *float64 `json:"measured_gain"`
			Jobs []struct {
				Job    string   `json:"job"`
				Solo   *float64 `json:"solo_samples_per_sec"`
				Packed *float64 `json:"packed_samples_per_sec"`
				Ratio  *float64 `json:"ratio"`
			} `json:"jobs"`
			Judgement string `json:"judgement"`
			Last      *struct {
				Time   time.Time `json:"time"`
				Kind   string    `json:"kind"`
				Job    string    `json:"job"`
				Status string    `json:"status"`
				Reason string    `json:"reason"`
			} `json:"last_decision"`
		} `json:"gpus"`
	} `json:"packing"`
}

func (in *instance) gpus() (gpusView, error) {
	var v gpusView
	err := harness.GetJSON(in.url+"/v1/gpus", &v)
	return v, err
}

// roundTime is the time of the planner's newest round.
func (in *instance) roundTime() (time.Time, error) {
	var r struct {
		Time time.Time `json:"time"`
	}
	err := harness.GetJSON(in.url+"/v1/plan", &r)
	return r.Time, err
}

// gpuOf is the GPU job (namespace/id) is on in v, "" when none.
func gpuOf(v gpusView, job string) string {
	for _, g := range v.Packing.GPUs {
		for _, j := range g.Jobs {
			if j.Job == job {
				return g.ID
			}
		}
	}
	return ""
}

// waitSolo waits until the planner has measured job's rate alone.
func waitSolo(t *testing.T, p *instance, job string) float64 {
	t.Helper()
	var solo float64
	harness.Eventually(t, 2*time.Minute, func() error {
		v, err := p.gpus()
		if err != nil {
			return err
		}
		for _, g := range v.Packing.GPUs {
			for _, j := range g.Jobs {
				if j.Job == job && j.Solo != nil && len(g.Jobs) == 1 {
					solo = *j.Solo
					return nil
				}
			}
		}
		return fmt.Errorf("%s not measured alone yet: %+v", job, v.Packing.GPUs)
	})
	return solo
}

// waitShared waits until the planner's round sees jobs a and b on gpu and
// returns that round's time.
func waitShared(t *testing.T, p *instance, gpu, a, b string) time.Time {
	t.Helper()
	var at time.Time
	harness.Eventually(t, 2*time.Minute, func() error {
		at0, err := p.roundTime()
		if err != nil {
			return err
		}
		v, err := p.gpus()
		if err != nil {
			return err
		}
		if gpuOf(v, a) != gpu || gpuOf(v, b) != gpu {
			return fmt.Errorf("%s on %q, %s on %q; want both on %s", a, gpuOf(v, a), b, gpuOf(v, b), gpu)
		}
		at = at0
		return nil
	})
	return at
}

var packFinalRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)

// finalHash waits for the trainer's final line in any allocation of job
// id and returns its parameters' hash.
func finalHash(t *testing.T, c *harness.C, id string, timeout time.Duration) string {
	t.Helper()
	var hash string
	harness.Eventually(t, timeout, func() error {
		allocs, _, err := c.Nomad.Jobs().Allocations(id, true, nil)
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if a.TaskStates["train"] == nil {
				continue
			}
			if m := packFinalRe.FindStringSubmatch(c.Logs(t, a.ID, "train", "stdout")); m != nil {
				hash = m[2]
				return nil
			}
		}
		return fmt.Errorf("%s: no final line yet in %d allocation(s)", id, len(allocs))
	})
	return hash
}

// unpackEventsOf are the job's worker group scaling events that record an
// unpack (they carry the GPU left in caravan_pack_gpu).
func unpackEventsOf(t *testing.T, c *harness.C, id string) []nomadapi.ScalingEvent {
	t.Helper()
	st, _, err := c.Nomad.Jobs().ScaleStatus(id, nil)
	must.NoError(t, err)
	var out []nomadapi.ScalingEvent
	for _, ev := range st.TaskGroups["worker"].Events {
		if _, ok := ev.Meta["caravan_pack_gpu"]; ok {
			out = append(out, ev)
		}
	}
	return out
}

// TestPlanner_LivePacking runs the planner with packing on against an
// agent of three time-sliced SIMULATED GPUs (interference MODELLED):
//   - two light trainers (10% GPU use) packed on one GPU stay packed: the
//     measured ratio of the one measured alone stays near 1;
//   - two GPU-bound trainers (100%) packed on one GPU are unpacked within
//     three planner intervals of the round that first saw them together:
//     the later one is moved to a free GPU by a device constraint, with an
//     event carrying the measured numbers, and both end bit for bit equal
//     to an uninterrupted run.
func TestPlanner_LivePacking(t *testing.T) {
	c := harness.Cluster(t)
	a := packingAgent(t, c)
	p := startPlanner(t, a.C, "packing", "packing {\n  enabled = true\n}\n")
	p.waitLeading(t)
	bin := filepath.Join(c.Root, "build", "caravan")
	var gpus []string
	harness.Eventually(t, time.Minute, func() error {
		v, err := p.gpus()
		if err != nil {
			return err
		}
		gpus = gpus[:0]
		for _, g := range v.Packing.GPUs {
			if g.MPS {
				return fmt.Errorf("GPU %s is MPS; this test needs time-slicing", g.ID)
			}
			gpus = append(gpus, g.ID)
		}
		if len(gpus) != 3 {
			return fmt.Errorf("%d GPUs in /v1/gpus, want 3", len(gpus))
		}
		return nil
	})
	run := time.Now().Unix() % 1000000
	submit := func(id, gpu string, use, steps int) string {
		return a.C.RunJob(t, packingJobspec, "name="+id, "caravan_bin="+bin, "planner_url="+p.url, "gpu="+gpu,
			fmt.Sprintf("gpu_use_percent=%d", use), fmt.Sprintf("steps=%d", steps))
	}

	t.Run("light pair stays packed", func(t *testing.T) {
		la := submit(fmt.Sprintf("pack-la-%d", run), gpus[0], 10, 3000)
		solo := waitSolo(t, p, "default/"+la)
		lb := submit(fmt.Sprintf("pack-lb-%d", run), gpus[0], 10, 3000)
		since := waitShared(t, p, gpus[0], "default/"+la, "default/"+lb)
		var ratio float64
		harness.Eventually(t, time.Minute, func() error {
			v, err := p.gpus()
			if err != nil {
				return err
			}
			for _, g := range v.Packing.GPUs {
				for _, j := range g.Jobs {
					if j.Job == "default/"+la && j.Ratio != nil && len(g.Jobs) == 2 {
						ratio = *j.Ratio
						return nil
					}
				}
			}
			return fmt.Errorf("%s not measured packed yet", la)
		})
		// Three more rounds: still packed, nothing unpacked.
		harness.Eventually(t, time.Minute, func() error {
			at, err := p.roundTime()
			if err != nil {
				return err
			}
			if at.Sub(since) < 4*packingInterval {
				return fmt.Errorf("round at %s, %s after the pair was first seen", at, at.Sub(since))
			}
			return nil
		})
		v, err := p.gpus()
		must.NoError(t, err)
		must.Eq(t, gpus[0], gpuOf(v, "default/"+la))
		must.Eq(t, gpus[0], gpuOf(v, "default/"+lb))
		must.SliceEmpty(t, unpackEventsOf(t, a.C, la))
		must.SliceEmpty(t, unpackEventsOf(t, a.C, lb))
		t.Logf("light pair on %s: %s alone %.0f samples/s, packed ratio %.2f; kept packed", gpus[0], la, solo, ratio)
		a.C.StopJob(t, la)
		a.C.StopJob(t, lb)
	})

	t.Run("GPU-bound pair unpacked", func(t *testing.T) {
		const steps = 3000
		want := referenceHash(steps)
		ba := submit(fmt.Sprintf("pack-ba-%d", run), gpus[0], 100, steps)
		solo := waitSolo(t, p, "default/"+ba)
		bb := submit(fmt.Sprintf("pack-bb-%d", run), gpus[0], 100, steps)
		since := waitShared(t, p, gpus[0], "default/"+ba, "default/"+bb)
		var decided time.Time
		var reason string
		harness.Eventually(t, 2*time.Minute, func() error {
			v, err := p.gpus()
			if err != nil {
				return err
			}
			for _, g := range v.Packing.GPUs {
				if g.ID == gpus[0] && g.Last != nil && g.Last.Job == "default/"+bb && !g.Last.Time.Before(since) {
					decided, reason = g.Last.Time, g.Last.Reason
					return nil
				}
			}
			return fmt.Errorf("no unpack of %s decided yet", bb)
		})
		t.Logf("unpack decided %s after the round that first saw the pair: %s", decided.Sub(since), reason)
		must.LessEq(t, 3*packingInterval, decided.Sub(since), must.Sprint("the bad pair was not unpacked within 3 planner intervals"))
		evs := unpackEventsOf(t, a.C, bb)
		must.SliceLen(t, 1, evs)
		must.Eq[any](t, gpus[0], evs[0].Meta["caravan_pack_gpu"])
		must.Eq[any](t, "unpack", evs[0].Meta["caravan_action"])
		must.Eq[any](t, "time-sliced", evs[0].Meta["caravan_pack_gpu_mode"])
		must.SliceEmpty(t, unpackEventsOf(t, a.C, ba))
		t.Logf("event: %s (meta %v); %s alone %.0f samples/s", evs[0].Message, evs[0].Meta, ba, solo)

		// b runs on, on another GPU, and both end bit for bit.
		harness.Eventually(t, 2*time.Minute, func() error {
			v, err := p.gpus()
			if err != nil {
				return err
			}
			if g := gpuOf(v, "default/"+bb); g == "" || g == gpus[0] {
				return fmt.Errorf("%s on %q", bb, g)
			}
			return nil
		})
		job, _, err := a.C.Nomad.Jobs().Info(bb, nil)
		must.NoError(t, err)
		cs := job.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints
		must.SliceLen(t, 1, cs)
		must.Eq(t, "!=", cs[0].Operand)
		ref := <-want
		must.Eq(t, ref, finalHash(t, a.C, ba, 4*time.Minute), must.Sprint(ba+"'s final parameters differ from an uninterrupted run"))
		must.Eq(t, ref, finalHash(t, a.C, bb, 4*time.Minute), must.Sprint(bb+"'s final parameters differ from an uninterrupted run"))
		t.Logf("both ended at step %d with params_sha256 %s… equal to the uninterrupted run", steps, ref[:16])
	})
}
