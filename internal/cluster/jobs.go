package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// ErrPurge is what Stop's error is when the job stopped but its purge
// failed.
var ErrPurge = errors.New("purging")

// varArgs turns "name=value" pairs into the CLI's -var flags.
func varArgs(vars []string) []string {
	var out []string
	for _, v := range vars {
		out = append(out, "-var", v)
	}
	return out
}

func (c *Cluster) path(jobspec string) string {
	if filepath.IsAbs(jobspec) {
		return jobspec
	}
	return filepath.Join(c.Root, jobspec)
}

// Render parses a jobspec (relative to Root) with vars ("name=value") as
// `nomad job run -output` does, and returns the job it would register.
func (c *Cluster) Render(ctx context.Context, jobspec string, vars ...string) (*nomadapi.Job, error) {
	args := append(append([]string{"job", "run", "-output"}, varArgs(vars)...), c.path(jobspec))
	out, err := c.CLI(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", jobspec, err)
	}
	var doc struct{ Job *nomadapi.Job }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("rendering %s: reading the CLI's job: %w", jobspec, err)
	}
	if doc.Job == nil || doc.Job.ID == nil {
		return nil, fmt.Errorf("rendering %s: the job has no ID", jobspec)
	}
	return doc.Job, nil
}

// Submit parses a jobspec (relative to Root) with vars ("name=value") and
// registers it with `nomad job run -detach`, as a user does; it returns
// the job's ID.
func (c *Cluster) Submit(ctx context.Context, jobspec string, vars ...string) (string, error) {
	job, err := c.Render(ctx, jobspec, vars...)
	if err != nil {
		return "", err
	}
	args := append(append([]string{"job", "run", "-detach"}, varArgs(vars)...), c.path(jobspec))
	if _, err := c.CLI(ctx, args...); err != nil {
		return "", err
	}
	c.say("nomad job run %s  (job %s)", jobspec, *job.ID)
	return *job.ID, nil
}

// Scale sets a group's count through Nomad's scaling API, with a reason
// and meta on the scaling event.
func (c *Cluster) Scale(ctx context.Context, jobID, group string, count int, reason string, meta map[string]any) error {
	q := (&nomadapi.WriteOptions{}).WithContext(ctx)
	if _, _, err := c.Nomad.Jobs().Scale(jobID, group, &count, reason, false, meta, q); err != nil {
		return fmt.Errorf("scaling %s/%s to %d: %w", jobID, group, count, err)
	}
	return nil
}

// notFound says whether err is Nomad's 404.
func notFound(err error) bool {
	var resp nomadapi.UnexpectedResponseError
	return errors.As(err, &resp) && resp.StatusCode() == http.StatusNotFound
}

// Stop stops a job, waits (to timeout) until none of its allocations runs
// or is pending (so a checkpoint taken on stop is committed), then purges
// it. A job Nomad does not know is no error; a failed purge of a stopped
// job is one that wraps ErrPurge.
func (c *Cluster) Stop(ctx context.Context, jobID string, timeout time.Duration) error {
	q := (&nomadapi.WriteOptions{}).WithContext(ctx)
	if _, _, err := c.Nomad.Jobs().Deregister(jobID, false, q); err != nil {
		if notFound(err) {
			return nil
		}
		return fmt.Errorf("stopping %s: %w", jobID, err)
	}
	if err := c.waitStopped(ctx, jobID, timeout); err != nil {
		return fmt.Errorf("stopping %s: %w", jobID, err)
	}
	if _, _, err := c.Nomad.Jobs().Deregister(jobID, true, q); err != nil {
		return fmt.Errorf("%w %s: %w", ErrPurge, jobID, err)
	}
	return nil
}

// Purge stops and purges those of ids that Nomad knows (it does not re-run
// a finished batch job whose spec is unchanged), waits (2 minutes each)
// until none of their allocations runs, and returns the IDs it purged.
func (c *Cluster) Purge(ctx context.Context, ids ...string) ([]string, error) {
	var purged []string
	for _, id := range ids {
		if _, _, err := c.Nomad.Jobs().Info(id, (&nomadapi.QueryOptions{}).WithContext(ctx)); err != nil {
			if notFound(err) {
				continue
			}
			return purged, err
		}
		if _, _, err := c.Nomad.Jobs().Deregister(id, true, (&nomadapi.WriteOptions{}).WithContext(ctx)); err != nil {
			return purged, err
		}
		purged = append(purged, id)
	}
	for _, id := range purged {
		if err := c.waitStopped(ctx, id, 2*time.Minute); err != nil {
			return purged, err
		}
	}
	return purged, nil
}

// waitStopped waits until no allocation ever listed under jobID (a purged
// job's too) runs or is pending.
func (c *Cluster) waitStopped(ctx context.Context, jobID string, timeout time.Duration) error {
	return c.Wait(ctx, jobID+"'s allocations to stop", timeout, func() (bool, error) {
		stubs, _, err := c.Nomad.Jobs().Allocations(jobID, true, (&nomadapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return false, err
		}
		if live := Live(stubs); len(live) > 0 {
			return false, fmt.Errorf("%d allocations still running (%s)", len(live), Summarize(live))
		}
		return true, nil
	})
}
