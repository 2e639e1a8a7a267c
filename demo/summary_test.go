package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestSummary_PrintsThePlannerPage(t *testing.T) {
	var b strings.Builder
	d := &Demo{cfg: Config{NomadAddr: "http://127.0.0.1:4646", ConsulAddr: "127.0.0.1:8500"}, out: &b, start: time.Now()}
	d.summary(&Result{Planner: PlannerResult{Instance: "127.0.0.1:23456"}})
	must.StrContains(t, b.String(), "Planner:   http://127.0.0.1:23456/ui")

	b.Reset()
	d.summary(&Result{})
	must.StrNotContains(t, b.String(), "Planner:")
}
