// Package ingest is the planner's side of the progress wire
// (github.com/caravan-nomad/caravan/progress): the HTTP handler behind
// POST /v1/progress, the verification of the Nomad workload identity that
// proves which job a report belongs to (identity.go, jwks.go), and the
// per-job store the manager fits models from.
package ingest

import (
	"time"

	"github.com/caravan-nomad/caravan/progress"
)

// Sample is the wire's sample (an alias: one definition, in the wire).
type Sample = progress.Sample

// Path is where tasks POST their progress.
const Path = progress.Path

// Record is a stored sample with where and when it came from. Every field
// of the sample is kept and shown.
type Record struct {
	Sample
	Time         time.Time `json:"time"`
	AllocationID string    `json:"allocation_id"`
	Task         string    `json:"task"`
}
