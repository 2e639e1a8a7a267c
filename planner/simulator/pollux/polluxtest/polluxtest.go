// Package polluxtest finds the shared Pollux data (traces, workloads,
// published figures) for tests and benchmarks. Where the data is absent a
// test skips, unless CARAVAN_REQUIRE_DATA=1 (`make test` sets it): then the
// absence fails it, so that no claim resting on the data goes unchecked.
package polluxtest

import (
	"os"
	"testing"

	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
)

// RequireEnv, set to 1, turns a missing data directory from a skip into a
// failure.
const RequireEnv = "CARAVAN_REQUIRE_DATA"

// Required reports whether RequireEnv is 1.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Dir returns the data directory (pollux.FindData: $CARAVAN_POLLUX_DATA,
// else shared/data/pollux beside the checkout). Without one it skips tb,
// or fails it when Required.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := pollux.FindData("")
	if err != nil {
		if Required() {
			tb.Fatalf("shared Pollux data not present (%s=1): %v", RequireEnv, err)
		}
		tb.Skip("shared Pollux data not present:", err)
	}
	return dir
}
