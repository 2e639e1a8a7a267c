package submit

import (
	"encoding/json"
	"fmt"

	nomadapi "github.com/hashicorp/nomad/api"
)

// CopyJob deep-copies a job read from Nomad, so a registration can change it
// without touching the source's shared snapshot. It clears the server-set
// fields a registration must not carry.
func CopyJob(job *nomadapi.Job) (*nomadapi.Job, error) {
	b, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("copying job: %w", err)
	}
	var cp nomadapi.Job
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("copying job: %w", err)
	}
	return &cp, nil
}
