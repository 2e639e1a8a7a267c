package demo

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/cluster"
)

const (
	trainJob   = "train-checkpointed"
	trainGroup = "train"
	trainTask  = "trainer"
)

// TrainingResult is the checkpointed job's story.
type TrainingResult struct {
	// Nodes are the nodes the job ran on, in order.
	Nodes []string
	// Allocs are its allocations, in order.
	Allocs []string
	// SuspendedAt and ResumedAt are the steps at the suspend's checkpoint
	// and at the resumed run's start.
	SuspendedAt, ResumedAt uint64
	// MigratedAt is the step the migrated run resumed from.
	MigratedAt uint64
	// Saved and Restored are the driver's checkpoint events, as shown.
	Saved, Restored []string
	// FinalStep and ParamsHash are from the trainer's last line.
	FinalStep  uint64
	ParamsHash string
	// ReferenceHash is the parameters' hash of an uninterrupted run of the
	// same training, and Identical whether the interrupted run matched it.
	ReferenceHash string
	Identical     bool
	// JCT is submission to completion, suspension included, from Nomad's
	// records.
	JCT time.Duration
}

var (
	stepLine    = regexp.MustCompile(`(?m)^step=(\d+) `)
	resumedLine = regexp.MustCompile(`(?m)^resumed step=(\d+) `)
	finalLine   = regexp.MustCompile(`(?m)^final step=(\d+) .*params_sha256=([0-9a-f]+)`)
)

// training submits the checkpointed trainer, suspends it by scaling its
// group to 0 and resumes it by scaling back to 1.
func (d *Demo) training(ctx context.Context) (TrainingResult, error) {
	res := TrainingResult{}
	if _, err := d.c.Submit(ctx, "jobspecs/train-checkpointed.nomad.hcl",
		"caravan_bin="+d.cfg.CaravanBin, "steps="+strconv.Itoa(d.cfg.Steps), "step_delay=5ms"); err != nil {
		return res, err
	}
	first, err := d.c.WaitRunning(ctx, trainJob, 1, 2*time.Minute)
	if err != nil {
		return res, err
	}
	res.note(first[0].ID, first[0].NodeName)
	if err := d.waitStep(ctx, first[0].ID, uint64(d.cfg.Steps/5)); err != nil {
		return res, err
	}

	d.say("suspend: nomad job scale %s %s 0", trainJob, trainGroup)
	if err := d.scale(ctx, trainJob, trainGroup, 0, "caravan demo: suspend"); err != nil {
		return res, err
	}
	stopped, err := d.c.WaitAllocStatus(ctx, first[0].ID, 2*time.Minute, nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed)
	if err != nil {
		return res, err
	}
	saved := cluster.Events(stopped, trainTask, "Checkpoint saved")
	if len(saved) == 0 {
		return res, fmt.Errorf("the suspended allocation %s shows no checkpoint event", stopped.ID[:8])
	}
	res.Saved = append(res.Saved, saved[len(saved)-1].DisplayMessage)
	res.SuspendedAt, _ = strconv.ParseUint(saved[len(saved)-1].Details["step"], 10, 64)
	d.say("%s: %s", trainJob, saved[len(saved)-1].DisplayMessage)

	d.say("resume: nomad job scale %s %s 1", trainJob, trainGroup)
	if err := d.scale(ctx, trainJob, trainGroup, 1, "caravan demo: resume"); err != nil {
		return res, err
	}
	alloc, err := d.waitNewAlloc(ctx, first[0].ID)
	if err != nil {
		return res, err
	}
	res.note(alloc.ID, alloc.NodeName)
	msg, step, err := d.restored(ctx, alloc.ID)
	if err != nil {
		return res, err
	}
	res.Restored = append(res.Restored, msg)
	res.ResumedAt = step
	d.say("%s: %s", trainJob, msg)
	d.say("%s resumed at step %d, not 0", trainJob, step)
	return res, nil
}

// migrate makes the training allocation's node ineligible, stops the
// allocation as an operator would (nomad alloc stop), and watches the
// replacement resume from the checkpoint on the other client.
func (d *Demo) migrate(ctx context.Context, res *TrainingResult) error {
	current := res.Allocs[len(res.Allocs)-1]
	alloc, _, err := d.c.Nomad.Allocations().Info(current, nil)
	if err != nil {
		return err
	}
	if err := d.waitStep(ctx, current, res.ResumedAt+uint64(d.cfg.Steps/10)); err != nil {
		return err
	}
	// Stopping an allocation that has finished would start a new one from
	// the last checkpoint: not a migration.
	if alloc, _, err = d.c.Nomad.Allocations().Info(current, nil); err != nil {
		return err
	}
	if alloc.ClientStatus != nomadapi.AllocClientStatusRunning {
		return fmt.Errorf("the trainer's allocation %s is %s before the migration: the training ended before the demo "+
			"could move it (more -steps give it longer)", current[:8], alloc.ClientStatus)
	}
	d.say("nomad node eligibility -disable %s; nomad alloc stop %s  (job %s)", alloc.NodeName, current[:8], trainJob)
	if _, err := d.c.Nomad.Nodes().ToggleEligibility(alloc.NodeID, false, nil); err != nil {
		return err
	}
	defer func() {
		if _, err := d.c.Nomad.Nodes().ToggleEligibility(alloc.NodeID, true, nil); err == nil {
			d.say("nomad node eligibility -enable %s", alloc.NodeName)
		}
	}()
	if _, err := d.c.CLI(ctx, "alloc", "stop", "-detach", current); err != nil {
		return err
	}
	stopped, err := d.c.WaitAllocStatus(ctx, current, 2*time.Minute, nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed)
	if err != nil {
		return err
	}
	if saved := cluster.Events(stopped, trainTask, "Checkpoint saved"); len(saved) > 0 {
		res.Saved = append(res.Saved, saved[len(saved)-1].DisplayMessage)
		d.say("%s: %s", trainJob, saved[len(saved)-1].DisplayMessage)
	}
	next, err := d.waitNewAlloc(ctx, current)
	if err != nil {
		return err
	}
	res.note(next.ID, next.NodeName)
	msg, step, err := d.restored(ctx, next.ID)
	if err != nil {
		return err
	}
	res.Restored = append(res.Restored, msg)
	res.MigratedAt = step
	d.say("%s: %s", trainJob, msg)
	d.say("%s moved from %s to %s; training continues at step %d", trainJob, alloc.NodeName, next.NodeName, step)
	return nil
}

// finishTraining waits for the trainer's last allocation to complete.
func (d *Demo) finishTraining(ctx context.Context, res *TrainingResult) error {
	last := res.Allocs[len(res.Allocs)-1]
	alloc, err := d.c.WaitAllocStatus(ctx, last, 10*time.Minute, nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed)
	if err != nil {
		return err
	}
	if alloc.ClientStatus != nomadapi.AllocClientStatusComplete {
		return fmt.Errorf("the trainer's allocation %s %s", last[:8], alloc.ClientStatus)
	}
	if res.JCT, err = d.jct(trainJob); err != nil {
		return err
	}
	out, err := d.c.Logs(ctx, last, trainTask, false)
	if err != nil {
		return err
	}
	m := finalLine.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("the trainer's log has no final line")
	}
	res.FinalStep, _ = strconv.ParseUint(m[1], 10, 64)
	res.ParamsHash = m[2]
	d.say("%s finished: step %d, parameters sha256 %s…, JCT %s", trainJob, res.FinalStep, res.ParamsHash[:16], res.JCT.Round(time.Second))

	// The same training without interruptions, run here: suspend, resume
	// and migration must not have changed a bit of the result.
	if res.ReferenceHash, err = d.referenceHash(ctx, d.cfg.Steps); err != nil {
		return err
	}
	res.Identical = res.ReferenceHash == res.ParamsHash
	d.say("%s: an uninterrupted run of the same training ends with sha256 %s…: identical = %t", trainJob, res.ReferenceHash[:min(16, len(res.ReferenceHash))], res.Identical)
	return nil
}

func (r *TrainingResult) note(allocID, node string) {
	r.Allocs = append(r.Allocs, allocID)
	r.Nodes = append(r.Nodes, node)
}

func (d *Demo) scale(ctx context.Context, job, group string, count int, reason string) error {
	return d.c.Scale(ctx, job, group, count, reason, map[string]any{"source": "caravan demo"})
}

// waitStep waits until the allocation's trainer reports at least step.
func (d *Demo) waitStep(ctx context.Context, allocID string, step uint64) error {
	return d.waitTaskStep(ctx, allocID, trainTask, step)
}

// waitNewAlloc waits for a running allocation of the trainer other than old.
func (d *Demo) waitNewAlloc(ctx context.Context, old string) (*nomadapi.AllocationListStub, error) {
	return d.waitNewAllocOf(ctx, trainJob, old)
}

// restored waits for the driver's restore event and the trainer's "resumed"
// line of a new allocation.
func (d *Demo) restored(ctx context.Context, allocID string) (string, uint64, error) {
	var msg string
	var step uint64
	err := d.c.Wait(ctx, "the restore event", time.Minute, func() (bool, error) {
		alloc, _, err := d.c.Nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return false, err
		}
		evs := cluster.Events(alloc, trainTask, "Checkpoint restored")
		if len(evs) == 0 {
			return false, nil
		}
		msg = evs[len(evs)-1].DisplayMessage
		out, err := d.c.Logs(ctx, allocID, trainTask, false)
		if err != nil {
			return false, err
		}
		m := resumedLine.FindStringSubmatch(out)
		if m == nil {
			return false, nil
		}
		step, _ = strconv.ParseUint(m[1], 10, 64)
		return true, nil
	})
	return msg, step, err
}
