package pollux

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/shoenig/test/must"
)

// forbidden reports why a type may not reach an online policy: it is (or
// holds) the trace, or a field is named for remaining work or epoch counts.
func forbidden(t reflect.Type, path string, seen map[reflect.Type]bool) []string {
	if seen[t] {
		return nil
	}
	seen[t] = true
	var out []string
	switch t {
	case reflect.TypeOf(Application{}), reflect.TypeOf(simJob{}), reflect.TypeOf(ndGrid{}), reflect.TypeOf(appPool{}):
		return []string{path + " is " + t.String()}
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		if t.Kind() == reflect.Map {
			out = append(out, forbidden(t.Key(), path+"[key]", seen)...)
		}
		out = append(out, forbidden(t.Elem(), path+"[]", seen)...)
	case reflect.Struct:
		if strings.HasPrefix(t.PkgPath(), "github.com/caravan-nomad/caravan/planner/workload") {
			out = append(out, path+" holds trace type "+t.String())
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.ToLower(f.Name)
			for _, bad := range []string{"remain", "epoch", "total", "app", "trace", "spec"} {
				if strings.Contains(name, bad) {
					out = append(out, path+"."+f.Name+" is named for "+bad)
				}
			}
			out = append(out, forbidden(f.Type, path+"."+f.Name, seen)...)
		}
	case reflect.Func:
		out = append(out, path+" is a function (could reach anything)")
	}
	return out
}

// TestOnlineViewCarriesNoOracle proves the information class through the
// types: onlineJob takes only the observed view and the finished-jobs
// history, and neither holds the trace, the simulated job, remaining work or
// epoch counts. (kindHistory holds what finished jobs reached and measured,
// which the online class may know.)
func TestOnlineViewCarriesNoOracle(t *testing.T) {
	fn := reflect.TypeOf(onlineJob)
	must.Eq(t, 3, fn.NumIn())
	must.Eq(t, reflect.TypeOf(policy.Traits{}), fn.In(0))
	must.Eq(t, reflect.TypeOf(&observed{}), fn.In(1))
	must.Eq(t, reflect.TypeOf(&kindHistory{}), fn.In(2))
	var bad []string
	for _, typ := range []reflect.Type{fn.In(1), fn.In(2)} {
		bad = append(bad, forbidden(typ, typ.String(), map[reflect.Type]bool{})...)
	}
	must.SliceEmpty(t, bad, must.Sprintf("%v", bad))
	// The walker does catch an oracle field.
	type leaky struct {
		observed
		remaining float64
		app       *Application
	}
	must.SliceLen(t, 3, forbidden(reflect.TypeOf(leaky{}), "leaky", map[reflect.Type]bool{}))
	// The declared view adds only requested workers and batch.
	must.SliceEmpty(t, forbidden(reflect.TypeOf(declared{}), "declared", map[reflect.Type]bool{}))
}

// TestSimulatorFollowsTraits: the fixed-size rule follows the trait, not
// the name, and every policy declares a class the simulator knows.
func TestSimulatorFollowsTraits(t *testing.T) {
	dir := sharedData(t)
	jobs, apps := smallWorkload(t, dir, 2)
	jobs[0].Replicas = 1000
	for _, in := range policy.Infos() {
		_, err := Simulate(engine.Config{MaxTime: 1}, in.Name, jobs, apps)
		if in.Traits.FixedSize {
			must.ErrorIs(t, err, engine.ErrStuck, must.Sprintf("%s", in.Name))
			must.ErrorContains(t, err, "requested size")
		} else if err != nil {
			must.StrNotContains(t, err.Error(), "requested size", must.Sprintf("%s", in.Name))
		}
	}
}
