package submit

import (
	"fmt"
	"slices"
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"
)

// The placement affinity the planner owns on a managed group: prefer the
// nodes the policy placed the job on (Optimus: fewest nodes). A user's other
// affinities are left alone.
const (
	AffinityAttribute = "${node.unique.id}"
	AffinityOperator  = "set_contains_any"
	AffinityWeight    = int8(50)
)

// PlacementNodes returns the nodes of the planner's affinity on group, if
// any (sorted).
func PlacementNodes(job *nomadapi.Job, group string) []string {
	for _, tg := range job.TaskGroups {
		if tg.Name == nil || *tg.Name != group {
			continue
		}
		for _, a := range tg.Affinities {
			if a != nil && a.LTarget == AffinityAttribute && a.Operand == AffinityOperator {
				nodes := strings.Split(a.RTarget, ",")
				slices.Sort(nodes)
				return nodes
			}
		}
	}
	return nil
}

// SetPlacement returns a copy of job whose group prefers nodes (replacing
// the planner's previous affinity; none if nodes is empty): a change a
// scale cannot express.
func SetPlacement(job *nomadapi.Job, group string, nodes []string) (*nomadapi.Job, error) {
	cp, err := CopyJob(job)
	if err != nil {
		return nil, err
	}
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	for _, tg := range cp.TaskGroups {
		if tg.Name == nil || *tg.Name != group {
			continue
		}
		kept := tg.Affinities[:0]
		for _, a := range tg.Affinities {
			if a != nil && a.LTarget == AffinityAttribute && a.Operand == AffinityOperator {
				continue
			}
			kept = append(kept, a)
		}
		tg.Affinities = kept
		if len(nodes) > 0 {
			tg.Affinities = append(tg.Affinities, nomadapi.NewAffinity(AffinityAttribute, AffinityOperator, strings.Join(nodes, ","), AffinityWeight))
		}
		return cp, nil
	}
	return nil, fmt.Errorf("setting placement of %s: group %q not found", *job.ID, group)
}
