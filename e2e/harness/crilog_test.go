package harness

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestCRILog(t *testing.T) {
	const podman = "2026-11-27T11:34:58.427142709+00:00 stdout F training seed=1\n" +
		"2026-11-27T11:34:58.43Z stderr F warning: slow\n" +
		"2026-11-27T11:34:58.44+00:00 stdout P final step=300 \n" +
		"2026-11-27T11:34:58.45+00:00 stderr P half\n" +
		"2026-11-27T11:34:58.46+00:00 stdout F params_sha256=c87c\n" +
		"2026-11-27T11:34:58.47+00:00 stdout F \n" +
		"2026-11-27T11:34:58.48+00:00 stderr F  line\n"
	for _, tc := range []struct {
		name, log string
		cri       bool
	}{
		{"podman", podman, true},
		{"plain", "step=50 loss=0.4\nfinal step=300\n", false},
		{"mixed", podman + "plain line\n", false},
		{"empty", "", false},
		{"no tag", "2026-11-27T11:34:58Z stdout hello\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) { must.Eq(t, tc.cri, isCRILog(tc.log)) })
	}
	must.Eq(t, "training seed=1\nfinal step=300 params_sha256=c87c\n\n", criStream(podman, "stdout"))
	must.Eq(t, "warning: slow\nhalf line\n", criStream(podman, "stderr"))
}
