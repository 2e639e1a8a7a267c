package demo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/cluster"
)

// The container job: the reference trainer as the image
// localhost/caravan-trainer:local (built here, never pulled:
// scripts/build-images.sh) under Nomad's own docker driver, checkpointed by
// caravan's restore and commit lifecycle tasks (jobspecs/train-container.nomad.hcl),
// running beside the host-process jobs.
const (
	containerJob     = "train-container"
	containerJobspec = "jobspecs/train-container.nomad.hcl"
	containerGroup   = "train"
	containerTask    = "trainer"
	// containerNode runs dockerd on the local cluster (scripts/cluster.sh).
	containerNode = "client1"
)

// ContainerResult is the container job's story.
type ContainerResult struct {
	// Allocs are its allocations, in order.
	Allocs []string
	// SuspendedAt is the step of the commit on suspend, ResumedAt the step
	// the resumed container started from.
	SuspendedAt, ResumedAt uint64
	// Saved and Restored are the lifecycle tasks' checkpoint events.
	Saved, Restored string
	// FinalStep and ParamsHash are from the trainer's last line.
	FinalStep  uint64
	ParamsHash string
	// ReferenceHash is an uninterrupted single-process run's; Identical
	// whether the container job's parameters equal it bit for bit.
	ReferenceHash string
	Identical     bool
}

// container submits the container job and suspends and resumes it; it
// then trains on beside the other parts (finishContainer reads its end).
func (d *Demo) container(ctx context.Context) (ContainerResult, error) {
	res := ContainerResult{}
	if _, err := d.c.Submit(ctx, containerJobspec, "job_name="+containerJob, "node="+containerNode,
		"steps="+strconv.Itoa(d.cfg.Steps), "step_delay=5ms"); err != nil {
		return res, err
	}
	first, err := d.c.WaitRunning(ctx, containerJob, 1, 2*time.Minute)
	if err != nil {
		return res, err
	}
	res.Allocs = append(res.Allocs, first[0].ID)
	if err := d.waitTaskStep(ctx, first[0].ID, containerTask, uint64(d.cfg.Steps/5)); err != nil {
		return res, err
	}

	d.say("suspend: nomad job scale %s %s 0 (SIGTERM: the trainer saves and exits, the poststop task commits)", containerJob, containerGroup)
	if err := d.scale(ctx, containerJob, containerGroup, 0, "caravan demo: suspend the container job"); err != nil {
		return res, err
	}
	saved, err := d.roleEvent(ctx, first[0].ID, "commit", "Checkpoint saved")
	if err != nil {
		return res, err
	}
	res.Saved = saved.DisplayMessage
	res.SuspendedAt, _ = strconv.ParseUint(saved.Details["step"], 10, 64)
	d.say("%s: %s", containerJob, res.Saved)
	if _, err := d.c.WaitAllocStatus(ctx, first[0].ID, 2*time.Minute, nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed); err != nil {
		return res, err
	}

	d.say("resume: nomad job scale %s %s 1 (the prestart task restores)", containerJob, containerGroup)
	if err := d.scale(ctx, containerJob, containerGroup, 1, "caravan demo: resume the container job"); err != nil {
		return res, err
	}
	next, err := d.waitNewAllocOf(ctx, containerJob, first[0].ID)
	if err != nil {
		return res, err
	}
	res.Allocs = append(res.Allocs, next.ID)
	restored, err := d.roleEvent(ctx, next.ID, "restore", "Checkpoint restored")
	if err != nil {
		return res, err
	}
	res.Restored = restored.DisplayMessage
	d.say("%s: %s", containerJob, res.Restored)
	err = d.c.Wait(ctx, "the container's resumed line", time.Minute, func() (bool, error) {
		out, err := d.c.Logs(ctx, next.ID, containerTask, false)
		if m := resumedLine.FindStringSubmatch(out); err == nil && m != nil {
			res.ResumedAt, _ = strconv.ParseUint(m[1], 10, 64)
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return res, err
	}
	d.say("%s resumed at step %d, not 0; it trains on beside the other jobs", containerJob, res.ResumedAt)
	return res, nil
}

// finishContainer waits for the container's final line (the trainer holds
// after it, -hold, so that its log can be read), compares its parameters
// with an uninterrupted run's bit for bit, and stops the job.
func (d *Demo) finishContainer(ctx context.Context, res *ContainerResult) error {
	last := res.Allocs[len(res.Allocs)-1]
	err := d.c.Wait(ctx, "the container job's final line", 10*time.Minute, func() (bool, error) {
		out, err := d.c.Logs(ctx, last, containerTask, false)
		if m := finalLine.FindStringSubmatch(out); err == nil && m != nil {
			res.FinalStep, _ = strconv.ParseUint(m[1], 10, 64)
			res.ParamsHash = m[2]
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return err
	}
	if res.ReferenceHash, err = d.referenceHash(ctx, d.cfg.Steps); err != nil {
		return err
	}
	res.Identical = res.ReferenceHash == res.ParamsHash
	d.say("%s finished: step %d, parameters sha256 %s…; an uninterrupted run's %s…: identical = %t",
		containerJob, res.FinalStep, res.ParamsHash[:min(16, len(res.ParamsHash))],
		res.ReferenceHash[:min(16, len(res.ReferenceHash))], res.Identical)
	// A service job holding after its last step: stop it (not purged, so
	// the UI keeps its story; its commit task saves the last state).
	_, err = d.c.CLI(ctx, "job", "stop", "-detach", containerJob)
	return err
}

// waitTaskStep waits until a task's trainer reports at least step.
func (d *Demo) waitTaskStep(ctx context.Context, allocID, task string, step uint64) error {
	return d.c.Wait(ctx, fmt.Sprintf("the %s to reach step %d", task, step), 3*time.Minute, func() (bool, error) {
		out, err := d.c.Logs(ctx, allocID, task, false)
		if err != nil {
			return false, err
		}
		ms := stepLine.FindAllStringSubmatch(out, -1)
		if len(ms) == 0 {
			return false, nil
		}
		n, _ := strconv.ParseUint(ms[len(ms)-1][1], 10, 64)
		return n >= step, nil
	})
}

// waitNewAllocOf waits for a running allocation of job other than old.
func (d *Demo) waitNewAllocOf(ctx context.Context, job, old string) (*nomadapi.AllocationListStub, error) {
	var found *nomadapi.AllocationListStub
	err := d.c.Wait(ctx, "the replacement allocation", 3*time.Minute, func() (bool, error) {
		as, err := d.c.Allocs(ctx, job)
		if err != nil {
			return false, err
		}
		for _, a := range as {
			if a.ID != old && a.ClientStatus == nomadapi.AllocClientStatusRunning {
				found = a
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}

// roleEvent waits for a lifecycle task's driver event starting with prefix.
func (d *Demo) roleEvent(ctx context.Context, allocID, task, prefix string) (*nomadapi.TaskEvent, error) {
	var ev *nomadapi.TaskEvent
	err := d.c.Wait(ctx, fmt.Sprintf("the %s task's %q event", task, prefix), 2*time.Minute, func() (bool, error) {
		alloc, _, err := d.c.Nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return false, err
		}
		if evs := cluster.Events(alloc, task, prefix); len(evs) > 0 {
			ev = evs[len(evs)-1]
			return true, nil
		}
		return false, nil
	})
	return ev, err
}
