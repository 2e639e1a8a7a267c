package adversarial

import (
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestDriver_SymlinkedCheckpointDir: a task replaces its checkpoint
// directory with a symlink to a host directory and fails, so Nomad restarts
// it in the same allocation. Expected: the restart gets a real, empty
// checkpoint directory; the host directory is neither emptied nor chowned
// (before the fix the driver, as root, emptied the link's target).
func TestDriver_SymlinkedCheckpointDir(t *testing.T) {
	a := newAdversary(t)
	a.run(t, `d=$CARAVAN_CHECKPOINT_DIR
if [ -e "$NOMAD_TASK_DIR/attacked" ]; then
  if [ -L "$d" ]; then echo "still a link"; else echo "second run: real dir"; fi
  exec sleep 600
fi
touch "$NOMAD_TASK_DIR/attacked"
rm -rf "$d" && ln -s `+a.sentinel+` "$d" && echo linked
exit 1`, "restarts=1")
	al := a.running(t)
	a.logged(t, al.ID, "second run: real dir")
	a.untouched(t)
}

// TestDriver_MarkerSpecialFiles: the marker is a FIFO (which blocked `nomad
// job stop` for 8+ minutes despite kill_timeout = 5s), a symlink to a host
// file (whose bytes leaked into a task event) or a 256 MiB file (read whole).
// Expected: each is refused unread; the stop ends within the kill timeout
// plus Nomad's own overhead; no host bytes reach an event; the earlier
// checkpoint stays the newest.
func TestDriver_MarkerSpecialFiles(t *testing.T) {
	cases := map[string]string{
		"fifo":    `rm -f "$d/caravan-checkpoint.json"; mkfifo "$d/caravan-checkpoint.json"`,
		"symlink": `ln -sf SENTINEL/host-secret "$d/caravan-checkpoint.json"`,
		"huge":    `rm -f "$d/caravan-checkpoint.json"; truncate -s 256M "$d/caravan-checkpoint.json"`,
	}
	for name, attack := range cases {
		t.Run(name, func(t *testing.T) {
			a := newAdversary(t)
			attack = strings.ReplaceAll(attack, "SENTINEL", a.sentinel)
			// The first checkpoint is honest; then the task plants the
			// marker and ignores further signals.
			a.run(t, handler(`if [ "$seq" -gt 1 ]; then `+attack+`; trap '' USR1; return; fi; echo state > "$d/state"`))
			al := a.running(t)
			a.logged(t, al.ID, "ready")
			a.checkpoint(t, al.ID, "Checkpoint saved (on demand)")
			gen := a.newest(t)
			must.Positive(t, gen)
			_, err := a.c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", al.ID, task)
			must.NoError(t, err)
			a.event(t, al.ID, "Checkpoint failed (on demand)")

			took := a.stopAlloc(t, al.ID)
			must.Less(t, time.Minute, took, must.Sprintf("stop took %s with kill_timeout = 5s", took))
			a.event(t, al.ID, "Checkpoint failed (stop)")
			a.noEventContains(t, al.ID, "HOST-SECRET")
			must.Eq(t, gen, a.newest(t), must.Sprint("the newest good checkpoint was replaced or lost"))
			a.untouched(t)
		})
	}
}

// TestDriver_TaskNeverWritesMarker: a task that ignores the checkpoint
// signal. Expected: the stop checkpoint fails with a timeout event and the
// task is stopped within its kill timeout; the earlier generation stays.
func TestDriver_TaskNeverWritesMarker(t *testing.T) {
	a := newAdversary(t)
	// One honest checkpoint, then the signal is ignored.
	a.run(t, handler(`echo state > "$d/state"; trap '' USR1`))
	al := a.running(t)
	a.logged(t, al.ID, "ready")
	a.checkpoint(t, al.ID, "Checkpoint saved (on demand)")
	gen := a.newest(t)
	took := a.stopAlloc(t, al.ID)
	must.Less(t, time.Minute, took)
	ev := a.event(t, al.ID, "Checkpoint failed (stop)")
	must.StrContains(t, ev.DriverMessage, "timed out")
	must.Eq(t, gen, a.newest(t))
	a.untouched(t)
}
