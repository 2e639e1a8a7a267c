package main

import "testing"

func TestRun(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"version"}, 0},
		{[]string{"planner"}, 2},
		{[]string{"trainer", "-no-such-flag"}, 2},
	} {
		if got := run(c.args); got != c.want {
			t.Errorf("run(%q) = %d, want %d", c.args, got, c.want)
		}
	}
}
