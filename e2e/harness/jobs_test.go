package harness

import (
	"errors"
	"testing"

	"github.com/shoenig/test/must"
)

// TestNotStartedYet: only Nomad's "not started yet" answer counts as no
// logs; any other failure of `nomad alloc logs` stays an error.
func TestNotStartedYet(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"prestart still running", errors.New(`nomad alloc logs 7d34 trainer: exit status 1: Failed to read stdout file: error reading file: Unexpected response code: 404 (task "trainer" not started yet. No logs available)`), true},
		{"unknown allocation", errors.New("nomad alloc logs x trainer: exit status 1: No allocation(s) with prefix or id \"x\" found"), false},
		{"unknown task", errors.New(`nomad alloc logs 7d34 nope: exit status 1: Could not find task named: nope`), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, notStartedYet(tc.err))
		})
	}
}
