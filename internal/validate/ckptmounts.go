package validate

import (
	"fmt"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/driver"
)

// checkpointMountErrors reports, per group, a main task that a caravan
// checkpoint.role task checkpoints and that mounts a volume over (above, or
// inside) its checkpoint directory: its checkpoints would go into the
// volume, which the commit never sees (driver.CheckpointMountErrors).
func checkpointMountErrors(job *nomadapi.Job) []error {
	var errs []error
	for _, tg := range job.TaskGroups {
		group := ""
		if tg.Name != nil {
			group = *tg.Name
		}
		for _, err := range driver.CheckpointMountErrors(tg) {
			errs = append(errs, fmt.Errorf("group %q %w", group, err))
		}
	}
	return errs
}
