package source

import (
	nomadapi "github.com/hashicorp/nomad/api"
)

// Where a group's count bounds came from (Spec.Bounds).
const (
	BoundsDefault     = "default"
	BoundsScaling     = "scaling"
	BoundsMeta        = "meta"
	BoundsScalingMeta = "scaling+meta"
)

// boundKeys names the meta keys and the group role of one pair of bounds.
type boundKeys struct {
	min, max, role string
}

// groupScaling returns a task group's scaling block, nil without one.
func groupScaling(job *nomadapi.Job, group string) *nomadapi.ScalingPolicy {
	for _, tg := range job.TaskGroups {
		if tg.Name != nil && *tg.Name == group && tg.Scaling != nil && tg.Scaling.Max != nil {
			return tg.Scaling
		}
	}
	return nil
}

// bounds derives a group's count bounds. Precedence: meta keys, then the
// group's scaling block, then the defaults. Inside a scaling block the meta
// may only narrow it, since Nomad refuses a count outside the block (its
// Scale endpoint checks min and max whether or not the block is enabled);
// a meta bound outside it is an error naming the key. A scaling min of 0
// still gives the planner a floor of 1 running group: 0 is suspension.
func (p *metaParser) bounds(sc *nomadapi.ScalingPolicy, k boundKeys, metaMin, metaMax *int, defMin, defMax int) (lo, hi int, src string) {
	lo, hi, src = defMin, defMax, BoundsDefault
	if sc != nil {
		scMin := int64(0)
		if sc.Min != nil {
			scMin = *sc.Min
		}
		lo, hi, src = max(int(scMin), 1), int(*sc.Max), BoundsScaling
		if metaMin != nil && int64(*metaMin) < scMin {
			p.bad(k.min, "%d is below the %s group's scaling min %d (Nomad refuses a count outside scaling { min max }); "+
				"raise it or remove the key", *metaMin, k.role, scMin)
			metaMin = nil
		}
		if metaMax != nil && int64(*metaMax) > *sc.Max {
			p.bad(k.max, "%d is above the %s group's scaling max %d (Nomad refuses a count outside scaling { min max }); "+
				"lower it or remove the key", *metaMax, k.role, *sc.Max)
			metaMax = nil
		}
		if lo > hi {
			p.bad(k.min, "the %s group's scaling max is %d; the planner needs at least 1", k.role, hi)
			return lo, hi, src
		}
	}
	if metaMin != nil || metaMax != nil {
		src = BoundsMeta
		if sc != nil {
			src = BoundsScalingMeta
		}
	}
	lo, hi = orDefault(metaMin, lo), orDefault(metaMax, hi)
	if lo > hi {
		p.bad(k.min, "min %d exceeds max %d", lo, hi)
	}
	return lo, hi, src
}
