package submit

import (
	"context"
	"errors"
	"fmt"
	"maps"

	nomadapi "github.com/hashicorp/nomad/api"
)

// scaleIndexState is what the Writer knows of Nomad's scale index checks.
type scaleIndexState int

const (
	scaleIndexUnknown  scaleIndexState = iota
	scaleIndexEnforced                 // Nomad 1.8.2 and later
	scaleIndexIgnored                  // before 1.8.2: JobModifyIndex silently ignored
)

// probeIndexOffset puts the probe's index far past any the job can have.
const probeIndexOffset = 1 << 40

// scaleIndexEnforced tells whether Nomad refuses a scale whose
// JobModifyIndex is not the job's, learning it once by behaviour: a scale
// of s's group to its current count, naming an index the job cannot have.
// An agent that enforces the index refuses it and writes nothing; one that
// ignores it records a new version of the job with the same count (and an
// event marked EventMetaProbe, which readers of the history skip). The
// decision being written then meets a moved index and is made again next
// round: the cost, once per planner process, on such an agent.
func (w *Writer) scaleIndexEnforced(ctx context.Context, s Scale) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.scaleIndex {
	case scaleIndexEnforced:
		return true, nil
	case scaleIndexIgnored:
		return false, nil
	}
	job, err := w.readJob(ctx, s.Namespace, s.JobID)
	if err != nil {
		return false, err
	}
	cur, ok := groupCount(job, s.Group)
	if !ok || job.JobModifyIndex == nil {
		return true, nil // nothing to probe with; Nomad refuses the scale itself
	}
	req := &nomadapi.ScalingRequest{
		Count:          &cur,
		Target:         map[string]string{"Job": s.JobID, "Group": s.Group},
		Message:        "caravan: does Nomad enforce a scale's job modify index? (count unchanged)",
		Meta:           map[string]any{EventMetaProbe: true},
		JobModifyIndex: *job.JobModifyIndex + probeIndexOffset,
	}
	_, err = w.scaleRequest(ctx, s, req)
	switch {
	case errors.Is(err, ErrConflict):
		w.scaleIndex = scaleIndexEnforced
		w.Logger.Info("Nomad enforces a scale's job modify index: counts change with scales")
		return true, nil
	case err == nil:
		w.scaleIndex = scaleIndexIgnored
		w.Logger.Warn("Nomad ignores a scale's job modify index (before 1.8.2): counts change with registrations "+
			"that enforce it, which needs the submit-job capability", "probed_job", s.Namespace+"/"+s.JobID)
		return false, nil
	default:
		return false, fmt.Errorf("probing whether Nomad enforces a scale's job modify index: %w", err)
	}
}

// scaleByRegister changes a count where Nomad ignores a scale's index: a
// registration of the job read at s.JobModifyIndex with the new count,
// enforcing that index, then a count-less scaling event with s's message
// and meta plus EventMetaCount, so a new leader still reads the history.
func (w *Writer) scaleByRegister(ctx context.Context, s Scale) (Result, error) {
	job, err := w.readJob(ctx, s.Namespace, s.JobID)
	if err != nil {
		return Result{}, err
	}
	if job.JobModifyIndex == nil || *job.JobModifyIndex != s.JobModifyIndex {
		return Result{}, fmt.Errorf("scaling %s/%s group %s: %w", s.Namespace, s.JobID, s.Group, ErrConflict)
	}
	cp, err := SetCounts(job, map[string]int{s.Group: s.Count})
	if err != nil {
		return Result{}, fmt.Errorf("scaling %s/%s group %s: %w: %w", s.Namespace, s.JobID, s.Group, ErrRejected, err)
	}
	res, err := w.Register(ctx, cp, s.JobModifyIndex, s.Message)
	if err != nil {
		return Result{}, err
	}
	meta := maps.Clone(s.Meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[EventMetaCount] = s.Count
	ev := Scale{Namespace: s.Namespace, JobID: s.JobID, Group: s.Group, EventOnly: true, Message: s.Message, Meta: meta}
	if _, err := w.Scale(ctx, ev); err != nil {
		w.Logger.Warn("the count changed but its scaling event was not recorded", "job", s.Namespace+"/"+s.JobID,
			"group", s.Group, "count", s.Count, "error", err)
	}
	return res, nil
}

func (w *Writer) readJob(ctx context.Context, ns, id string) (*nomadapi.Job, error) {
	q := (&nomadapi.QueryOptions{Namespace: ns}).WithContext(ctx)
	job, _, err := w.Client.Jobs().Info(id, q)
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", ns, id, err)
	}
	return job, nil
}

func groupCount(job *nomadapi.Job, group string) (int64, bool) {
	for _, tg := range job.TaskGroups {
		if tg.Name != nil && *tg.Name == group && tg.Count != nil {
			return int64(*tg.Count), true
		}
	}
	return 0, false
}

// EventCount is the count a scaling event set: its Count, or for a
// count-less event the planner wrote after changing the count by a
// registration, its EventMetaCount. Probe events (EventMetaProbe) set none.
func EventCount(ev *nomadapi.ScalingEvent) (int64, bool) {
	if ev == nil {
		return 0, false
	}
	if _, probe := ev.Meta[EventMetaProbe]; probe {
		return 0, false
	}
	if ev.Count != nil {
		return *ev.Count, true
	}
	switch v := ev.Meta[EventMetaCount].(type) {
	case float64: // JSON
		return int64(v), true
	case int:
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}
