package source

import (
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

func scaled(job *nomadapi.Job, group string, lo, hi int64) *nomadapi.Job {
	for _, tg := range job.TaskGroups {
		if *tg.Name == group {
			tg.Scaling = &nomadapi.ScalingPolicy{Min: &lo, Max: &hi}
		}
	}
	return job
}

func TestParseSpecScalingBounds(t *testing.T) {
	cases := []struct {
		name           string
		scaling        []int64 // min, max of the worker group; nil: none
		meta           map[string]string
		err            string
		lo, hi         int
		src            string
		suspendable    bool
		nomadMinWorker int
	}{
		{"defaults", nil, nil, "", 1, 8, BoundsDefault, true, 0},
		{"meta only", nil, map[string]string{MetaMinWorkers: "2", MetaMaxWorkers: "12"}, "", 2, 12, BoundsMeta, true, 0},
		{"scaling block", []int64{2, 6}, nil, "", 2, 6, BoundsScaling, false, 2},
		{"scaling min 0 keeps a floor of 1", []int64{0, 4}, nil, "", 1, 4, BoundsScaling, true, 0},
		{"meta narrows scaling", []int64{1, 10}, map[string]string{MetaMinWorkers: "2", MetaMaxWorkers: "5"}, "", 2, 5, BoundsScalingMeta, false, 1},
		{"meta max above scaling max", []int64{1, 4}, map[string]string{MetaMaxWorkers: "8"}, MetaMaxWorkers + ": 8 is above the worker group's scaling max 4", 0, 0, "", false, 0},
		{"meta min below scaling min", []int64{3, 6}, map[string]string{MetaMinWorkers: "1"}, MetaMinWorkers + ": 1 is below the worker group's scaling min 3", 0, 0, "", false, 0},
		{"meta min above scaling max", []int64{1, 4}, map[string]string{MetaMinWorkers: "6"}, "min 6 exceeds max 4", 0, 0, "", false, 0},
		{"scaling max 0", []int64{0, 0}, nil, "scaling max is 0", 0, 0, "", false, 0},
		{"suspendable with scaling min", []int64{2, 4}, map[string]string{MetaSuspendable: "true"}, MetaSuspendable, 0, 0, "", false, 0},
		{"not suspendable with scaling min is fine", []int64{2, 4}, map[string]string{MetaSuspendable: "false"}, "", 2, 4, BoundsScaling, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := fakenomad.TrainingJob("a", 1, tc.meta)
			if tc.scaling != nil {
				job = scaled(job, "worker", tc.scaling[0], tc.scaling[1])
			}
			s, err := ParseSpec(job)
			if tc.err != "" {
				must.ErrorIs(t, err, ErrBadMeta)
				must.ErrorContains(t, err, tc.err)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.lo, s.MinWorkers)
			must.Eq(t, tc.hi, s.MaxWorkers)
			must.Eq(t, tc.src, s.Bounds.Workers)
			must.Eq(t, tc.suspendable, s.Suspendable)
			must.Eq(t, tc.nomadMinWorker, s.NomadMinWorkers)
		})
	}
}

func TestParseSpecPSScaling(t *testing.T) {
	job := fakenomad.TrainingJob("a", 2, map[string]string{MetaPSGroup: "ps", MetaMaxPS: "2"})
	job.AddTaskGroup(nomadapi.NewTaskGroup("ps", 1))
	job = scaled(job, "ps", 1, 3)
	s, err := ParseSpec(job)
	must.NoError(t, err)
	must.Eq(t, 1, s.MinPS)
	must.Eq(t, 2, s.MaxPS)
	must.Eq(t, BoundsScalingMeta, s.Bounds.PS)

	job.Meta[MetaMaxPS] = "5"
	_, err = ParseSpec(job)
	must.ErrorContains(t, err, MetaMaxPS+": 5 is above the ps group's scaling max 3")
}

func TestUnknownKeys(t *testing.T) {
	cases := []struct {
		name string
		meta map[string]string
		want []string
	}{
		{"none", map[string]string{MetaMaxWorkers: "2", "owner": "ml-team"}, nil},
		{"typo", map[string]string{"caravan_max_worker": "2"},
			[]string{`unknown meta key "caravan_max_worker" is ignored; did you mean "caravan_max_workers"?`}},
		{"case", map[string]string{"CARAVAN_GANG": "true"},
			[]string{`unknown meta key "CARAVAN_GANG" is ignored; did you mean "caravan_gang"?`}},
		{"swapped words", map[string]string{"caravan_workers_max": "2"},
			[]string{`unknown meta key "caravan_workers_max" is ignored`}},
		{"far from any", map[string]string{"caravan_colour": "blue"},
			[]string{`unknown meta key "caravan_colour" is ignored`}},
		{"sorted", map[string]string{"caravan_prioirty": "9", "caravan_gnag": "true"}, []string{
			`unknown meta key "caravan_gnag" is ignored; did you mean "caravan_gang"?`,
			`unknown meta key "caravan_prioirty" is ignored; did you mean "caravan_priority"?`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, UnknownKeys(tc.meta))
		})
	}
}

func TestParseSpecKeepsManagingWithUnknownKeys(t *testing.T) {
	s, err := ParseSpec(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_worker": "2"}))
	must.NoError(t, err)
	must.Eq(t, 8, s.MaxWorkers)
	must.SliceLen(t, 1, s.Warnings)
}
