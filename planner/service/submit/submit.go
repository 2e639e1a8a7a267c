// Package submit writes the planner's decisions to Nomad: Jobs().Scale for
// count changes (the message names the marginal gain, so the UI's scaling
// events explain each one) and full registrations for changes a scale cannot
// express. Every write enforces the job modify index the decision was based
// on, so a concurrent edit by a user (or a deposed leader's late write) is
// never overwritten: Nomad refuses the write and the planner decides again on
// the new version.
//
// A Nomad agent before 1.8.2 ignores a scale's JobModifyIndex. The Writer
// finds out by behaviour (scaleindex.go) and, on such an agent, changes a
// count with a registration that enforces the index, followed by a
// count-less scaling event carrying the planner's meta and the new count
// (EventMetaCount), so the job's history reads the same.
package submit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
)

// ErrConflict means the job changed since the planner read it.
var ErrConflict = errors.New("job changed since it was read")

// ErrRejected means Nomad refused the write as invalid now (HTTP 4xx, e.g.
// "job scaling blocked due to active deployment"): retrying the same write
// at once will not help; the next round decides again.
var ErrRejected = errors.New("nomad rejected the update")

// ErrForbidden means the planner's Nomad token lacks the ACL capability
// the write needs (HTTP 403): scale-job for scales, submit-job for
// registrations (jobspecs/acl/ has both policies). Retrying will not help
// until an operator grants it.
var ErrForbidden = errors.New("the planner's Nomad token may not do this")

// Capabilities a write needs, named in ErrForbidden errors.
const (
	CapabilityScale  = "scale-job"
	CapabilitySubmit = "submit-job"
)

// forbidden explains a 403: which capability, and the policy granting it.
func forbidden(err error, capability string) error {
	var ue nomadapi.UnexpectedResponseError
	if !errors.As(err, &ue) || ue.StatusCode() != 403 {
		return nil
	}
	policy := "jobspecs/acl/planner-nomad.policy.hcl"
	if capability == CapabilitySubmit {
		policy = "jobspecs/acl/planner-nomad-register.policy.hcl"
	}
	return fmt.Errorf("%w: it needs the %s capability (policy %s): %w", ErrForbidden, capability, policy, err)
}

// Meta keys the planner puts on its scaling events, so any instance (a new
// leader after a failover) can tell why a job is at zero.
const (
	EventMetaAction = "caravan_action"
	EventMetaGain   = "caravan_gain"
	EventMetaPolicy = "caravan_policy"
	// MetaReclaimedBy names the team queue a suspend or shrink gave its
	// GPUs back to (a reclaim of borrowed GPUs).
	MetaReclaimedBy = "caravan_reclaimed_by"
	// EventMetaCount is the count a count-less event records, when the
	// count was changed by a registration (an agent that ignores a scale's
	// index): EventCount reads it as the event's count.
	EventMetaCount = "caravan_count"
	// EventMetaProbe marks the write that tells whether Nomad enforces a
	// scale's index (scaleindex.go); readers of the history skip it.
	EventMetaProbe = "caravan_probe"
)

// Actions recorded in EventMetaAction.
const (
	ActionScale     = "scale"
	ActionSuspend   = "suspend"
	ActionResume    = "resume"
	ActionUserError = "user-error-stop"
	ActionConverged = "converged-stop"
	// ActionResize changes the GPU shares per worker (a registration,
	// recorded by a count-less event with EventMetaCount).
	ActionResize = "resize"
	// ActionResizeNote records a resize refused or waiting (no change).
	ActionResizeNote = "resize-note"
)

// ActionGangRollback is a gang left partly placed and scaled back to 0: it
// waits as a suspended job does.
const ActionGangRollback = "gang-rollback"

// Scale is one count change of one task group.
type Scale struct {
	Namespace, JobID, Group string
	Count                   int
	// JobModifyIndex is the index of the job version the decision was based
	// on; the write fails with ErrConflict if the job changed since.
	JobModifyIndex uint64
	Message        string
	// Error marks the event as an error in Nomad's UI. Nomad refuses a count
	// with an error, so an error is recorded as an event only (EventOnly).
	Error bool
	// EventOnly records a scaling event without changing the job (Count and
	// JobModifyIndex are ignored).
	EventOnly bool
	Meta      map[string]any
}

// Writer submits decisions. It is the only code in the planner that writes
// to Nomad.
type Writer struct {
	Client *nomadapi.Client
	Logger hclog.Logger

	mu         sync.Mutex
	scaleIndex scaleIndexState // learnt once (scaleindex.go)
}

func isRejected(err error) bool {
	var ue nomadapi.UnexpectedResponseError
	return errors.As(err, &ue) && ue.StatusCode() >= 400 && ue.StatusCode() < 500
}

func isConflict(err error) bool {
	var ue nomadapi.UnexpectedResponseError
	// Nomad reports a failed index check only as text; the api package
	// exports the prefix for exactly this test.
	return errors.As(err, &ue) && strings.Contains(ue.Body(), nomadapi.RegisterEnforceIndexErrPrefix)
}

// Result is what Nomad answered to a write.
type Result struct {
	EvalID string
	// JobModifyIndex is the job's index after the write: a follow-up write
	// in the same decision enforces it.
	JobModifyIndex uint64
}

// Scale submits a scale request.
func (w *Writer) Scale(ctx context.Context, s Scale) (Result, error) {
	if s.JobModifyIndex == 0 && !s.EventOnly {
		return Result{}, fmt.Errorf("scaling %s/%s: refusing to scale without a job modify index", s.Namespace, s.JobID)
	}
	if s.Error && !s.EventOnly {
		return Result{}, fmt.Errorf("scaling %s/%s: an error event cannot change the count (Nomad refuses it)", s.Namespace, s.JobID)
	}
	if !s.EventOnly {
		enforced, err := w.scaleIndexEnforced(ctx, s)
		if err != nil {
			return Result{}, err
		}
		if !enforced {
			return w.scaleByRegister(ctx, s)
		}
	}
	count := int64(s.Count)
	countp := &count
	if s.EventOnly {
		countp = nil
		s.JobModifyIndex = 0
	}
	req := &nomadapi.ScalingRequest{
		Count:          countp,
		Target:         map[string]string{"Job": s.JobID, "Group": s.Group},
		Message:        s.Message,
		Error:          s.Error,
		Meta:           s.Meta,
		JobModifyIndex: s.JobModifyIndex,
	}
	resp, err := w.scaleRequest(ctx, s, req)
	if err != nil {
		return Result{}, err
	}
	if s.EventOnly {
		w.Logger.Info("recorded scaling event", "job", s.Namespace+"/"+s.JobID, "group", s.Group, "error", s.Error, "message", s.Message)
	} else {
		w.Logger.Info("scaled", "job", s.Namespace+"/"+s.JobID, "group", s.Group, "count", s.Count, "eval_id", resp.EvalID, "message", s.Message)
	}
	return Result{EvalID: resp.EvalID, JobModifyIndex: resp.JobModifyIndex}, nil
}

// scaleRequest sends one scale request, its errors classified.
func (w *Writer) scaleRequest(ctx context.Context, s Scale, req *nomadapi.ScalingRequest) (*nomadapi.JobRegisterResponse, error) {
	q := (&nomadapi.WriteOptions{Namespace: s.Namespace}).WithContext(ctx)
	resp, _, err := w.Client.Jobs().ScaleWithRequest(s.JobID, req, q)
	if err != nil {
		if isConflict(err) {
			return nil, fmt.Errorf("scaling %s/%s group %s: %w", s.Namespace, s.JobID, s.Group, ErrConflict)
		}
		if ferr := forbidden(err, CapabilityScale); ferr != nil {
			return nil, fmt.Errorf("scaling %s/%s group %s: %w", s.Namespace, s.JobID, s.Group, ferr)
		}
		if isRejected(err) {
			return nil, fmt.Errorf("scaling %s/%s group %s: %w: %w", s.Namespace, s.JobID, s.Group, ErrRejected, err)
		}
		return nil, fmt.Errorf("scaling %s/%s group %s: %w", s.Namespace, s.JobID, s.Group, err)
	}
	return resp, nil
}

// Register submits a full job registration built from a job the planner
// read (and copied) at modifyIndex, for changes a scale cannot express
// (several groups at once, GPU shares per worker, placement affinities).
func (w *Writer) Register(ctx context.Context, job *nomadapi.Job, modifyIndex uint64, reason string) (Result, error) {
	if modifyIndex == 0 {
		return Result{}, fmt.Errorf("registering %s: refusing to register without a job modify index", *job.ID)
	}
	ns := ""
	if job.Namespace != nil {
		ns = *job.Namespace
	}
	q := (&nomadapi.WriteOptions{Namespace: ns}).WithContext(ctx)
	resp, _, err := w.Client.Jobs().RegisterOpts(job, &nomadapi.RegisterOptions{EnforceIndex: true, ModifyIndex: modifyIndex}, q)
	if err != nil {
		if isConflict(err) {
			return Result{}, fmt.Errorf("registering %s/%s: %w", ns, *job.ID, ErrConflict)
		}
		if ferr := forbidden(err, CapabilitySubmit); ferr != nil {
			return Result{}, fmt.Errorf("registering %s/%s: %w", ns, *job.ID, ferr)
		}
		if isRejected(err) {
			return Result{}, fmt.Errorf("registering %s/%s: %w: %w", ns, *job.ID, ErrRejected, err)
		}
		return Result{}, fmt.Errorf("registering %s/%s: %w", ns, *job.ID, err)
	}
	w.Logger.Info("registered job update", "job", ns+"/"+*job.ID, "eval_id", resp.EvalID, "reason", reason)
	return Result{EvalID: resp.EvalID, JobModifyIndex: resp.JobModifyIndex}, nil
}

// SetCounts returns a copy of job with the given task group counts, for a
// registration that changes several groups in one version.
func SetCounts(job *nomadapi.Job, counts map[string]int) (*nomadapi.Job, error) {
	cp, err := CopyJob(job)
	if err != nil {
		return nil, err
	}
	found := 0
	for _, tg := range cp.TaskGroups {
		if tg.Name == nil {
			continue
		}
		if n, ok := counts[*tg.Name]; ok {
			c := n
			tg.Count = &c
			found++
		}
	}
	if found != len(counts) {
		return nil, fmt.Errorf("setting counts of %s: %d of %d groups found", *job.ID, found, len(counts))
	}
	return cp, nil
}

// SetDeviceCount returns a copy of job whose tasks in group request count
// instances of the device (e.g. GPU shares per worker): a change a scale
// cannot express.
func SetDeviceCount(job *nomadapi.Job, group, device string, count uint64) (*nomadapi.Job, error) {
	return EditDevice(job, group, device, "setting "+device+" count", func(d *nomadapi.RequestedDevice) {
		c := count
		d.Count = &c
	})
}

// EditDevice returns a copy of job in which edit has changed every request
// of the device by a task of group; what names the change in the error
// when no task there requests the device.
func EditDevice(job *nomadapi.Job, group, device, what string, edit func(*nomadapi.RequestedDevice)) (*nomadapi.Job, error) {
	cp, err := CopyJob(job)
	if err != nil {
		return nil, err
	}
	changed := 0
	for _, tg := range cp.TaskGroups {
		if tg.Name == nil || *tg.Name != group {
			continue
		}
		for _, t := range tg.Tasks {
			if t.Resources == nil {
				continue
			}
			for _, d := range t.Resources.Devices {
				if d != nil && d.Name == device {
					edit(d)
					changed++
				}
			}
		}
	}
	if changed == 0 {
		return nil, fmt.Errorf("%s in %s group %s: no task requests it", what, *job.ID, group)
	}
	return cp, nil
}

// Stop stops a job (as `nomad job stop` does, without purging it), enforcing
// the modify index; the driver takes a final checkpoint as tasks stop.
func (w *Writer) Stop(ctx context.Context, job *nomadapi.Job, modifyIndex uint64, reason string) (Result, error) {
	cp, err := CopyJob(job)
	if err != nil {
		return Result{}, err
	}
	stop := true
	cp.Stop = &stop
	return w.Register(ctx, cp, modifyIndex, reason)
}
