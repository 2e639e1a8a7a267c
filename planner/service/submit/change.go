package submit

import (
	"slices"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Change is one planner decision on one job, in the shape of the writes
// that apply it: the version it was based on, the counts it sets, the
// planner's placement, and the words and meta its scaling events carry.
// Its methods build each write (a scale, an event, a new version), so the
// requests of one decision are made in one place.
type Change struct {
	Namespace, JobID string
	// Job is the version the decision was based on, read at JobModifyIndex.
	Job            *nomadapi.Job
	JobModifyIndex uint64
	// Counts are the task group counts the decision sets.
	Counts map[string]int
	// Group is the group the placement affinity is on (the workers); Nodes
	// the nodes the policy placed it on, none without placement affinity.
	Group   string
	Nodes   []string
	Message string
	Meta    map[string]any
}

// Scale is the write that sets group's count, enforcing index (the
// decision's JobModifyIndex for the first write, then the index the
// previous write produced).
func (c Change) Scale(group string, index uint64) Scale {
	return Scale{
		Namespace: c.Namespace, JobID: c.JobID, Group: group, Count: c.Counts[group],
		JobModifyIndex: index, Message: c.Message, Meta: c.Meta,
	}
}

// Event is a count-less scaling event on group: it records the decision in
// Nomad without changing the job (isErr shows it red in the UI).
func (c Change) Event(group string, isErr bool) Scale {
	return Scale{
		Namespace: c.Namespace, JobID: c.JobID, Group: group,
		EventOnly: true, Error: isErr, Message: c.Message, Meta: c.Meta,
	}
}

// Version is a copy of the job with the decision's counts and placement,
// for a registration.
func (c Change) Version() (*nomadapi.Job, error) {
	cp, err := SetCounts(c.Job, c.Counts)
	if err == nil && len(c.Nodes) > 0 {
		cp, err = SetPlacement(cp, c.Group, c.Nodes)
	}
	return cp, err
}

// MovesPlacement reports whether the decision places the job on nodes other
// than those its current placement affinity names.
func (c Change) MovesPlacement() bool {
	return len(c.Nodes) > 0 && !slices.Equal(c.Nodes, PlacementNodes(c.Job, c.Group))
}
