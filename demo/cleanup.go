package demo

import (
	"context"
	"os"
	"path/filepath"
)

// demoJobs are the job IDs the demo submits.
var demoJobs = append([]string{"share-a", "share-b", trainJob, containerJob}, ElasticJobs...)

// cleanup purges what an earlier run of the demo left: its jobs (Nomad does
// not re-run a finished batch job whose spec is unchanged), their
// checkpoints (a new run would resume from them) and the simulated jobs'
// shared step files. The planner job is left running.
func (d *Demo) cleanup(ctx context.Context) error {
	purged, err := d.c.Purge(ctx, demoJobs...)
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
