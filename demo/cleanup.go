package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// demoJobs are the job IDs the demo submits.
var demoJobs = append([]string{"share-a", "share-b", trainJob, containerJob}, ElasticJobs...)

// cleanup purges what an earlier run of the demo left: its jobs (Nomad does
// not re-run a finished batch job whose spec is unchanged), their
// checkpoints (a new run would resume from them) and the simulated jobs'
// shared step files. The planner job is left running.
func (d *Demo) cleanup(ctx context.Context) error {
	purged, err := d.Purge(ctx, demoJobs...)
	if err != nil {
		return err
	}
	if len(purged) > 0 {
		d.say("purged the previous demo run's jobs %v", purged)
	}
	for _, id := range demoJobs {
		// The checkpoint store's key directories (namespace/job@incarnation/...;
		// the demo's job IDs need no escaping) and the simulated jobs' step
		// files (jobspecs/planner-train-sim.nomad.hcl).
		dirs, err := filepath.Glob(filepath.Join(d.cfg.CheckpointStore, "default", id+"@*"))
		if err != nil {
			return err
		}
		dirs = append(dirs, filepath.Join(d.cfg.CheckpointStore, "default", id), filepath.Join(d.cfg.StateDir, "default-"+id))
		for _, dir := range dirs {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// Purge stops and purges the jobs that exist of ids (Nomad does not re-run
// a finished batch job whose spec is unchanged), waits until none of their
// allocations runs, and returns the IDs it purged.
func (d *Demo) Purge(ctx context.Context, ids ...string) ([]string, error) {
	var purged []string
	for _, id := range ids {
		if _, _, err := d.nomad.Jobs().Info(id, nil); err != nil {
			var resp nomadapi.UnexpectedResponseError
			if errors.As(err, &resp) && resp.StatusCode() == http.StatusNotFound {
				continue
			}
			return purged, err
		}
		if _, _, err := d.nomad.Jobs().Deregister(id, true, nil); err != nil {
			return purged, err
		}
		purged = append(purged, id)
	}
	for _, id := range purged {
		err := d.poll(ctx, "the earlier run's "+id+" to stop", 2*time.Minute, func() (bool, error) {
			as, _, err := d.nomad.Allocations().List(&nomadapi.QueryOptions{
				Filter: fmt.Sprintf(`JobID == %q and (ClientStatus == "running" or ClientStatus == "pending")`, id),
			})
			return err == nil && len(as) == 0, err
		})
		if err != nil {
			return purged, err
		}
	}
	return purged, nil
}
