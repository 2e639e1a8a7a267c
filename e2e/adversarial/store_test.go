package adversarial

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestStore_ChainedSymlinks: a checkpoint holds "sub/u -> .." and
// "v -> sub/u/..", each harmless alone but together pointing above the
// checkpoint directory (checkLink only checked lexically, and such links
// were restored pointing outside). Expected: the commit is refused with an
// event, the good generation before stays the newest, and a restart
// restores that one, without the links.
func TestStore_ChainedSymlinks(t *testing.T) {
	a := newAdversary(t)
	a.run(t, handler(`echo state > "$d/state"
  if [ "$seq" -gt 1 ]; then mkdir -p "$d/sub"; ln -sfn .. "$d/sub/u"; ln -sfn sub/u/.. "$d/v"; fi`))
	al := a.running(t)
	a.logged(t, al.ID, "ready")
	a.checkpoint(t, al.ID, "Checkpoint saved (on demand)")
	gen := a.newest(t)
	ev := a.checkpoint(t, al.ID, "Checkpoint failed (on demand)")
	must.StrContains(t, ev.DriverMessage, "escapes")
	must.Eq(t, gen, a.newest(t))
	a.stopAlloc(t, al.ID)
	a.untouched(t)
}

// TestStore_SpecialFiles: FIFOs, sockets and device nodes in a checkpoint
// are refused (never opened, so never blocked on); a hard link to a host
// file is stored as a copy, and restoring it writes a new file, never
// through to the host file. Expected: the commits with special files fail
// with an event and keep the newest good generation; the host file is
// untouched after the task rewrites its restored copy.
func TestStore_SpecialFiles(t *testing.T) {
	cases := map[string]string{
		"fifo":   `mkfifo "$d/pipe"`,
		"socket": `(cd "$d" && /usr/bin/python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('sock')")`,
		"device": `mknod "$d/null" c 1 3`,
	}
	for name, attack := range cases {
		t.Run(name, func(t *testing.T) {
			a := newAdversary(t)
			a.run(t, handler(`echo state > "$d/state"; if [ "$seq" -gt 1 ]; then `+attack+`; fi`))
			al := a.running(t)
			a.logged(t, al.ID, "ready")
			a.checkpoint(t, al.ID, "Checkpoint saved (on demand)")
			gen := a.newest(t)
			ev := a.checkpoint(t, al.ID, "Checkpoint failed (on demand)")
			must.StrContains(t, ev.DriverMessage, "unsupported file type")
			must.Eq(t, gen, a.newest(t))
			a.untouched(t)
		})
	}
	t.Run("hard link", func(t *testing.T) {
		a := newAdversary(t)
		a.run(t, `d=$CARAVAN_CHECKPOINT_DIR
if [ "$CARAVAN_CHECKPOINT_GENERATION" != 0 ]; then
  echo "overwritten by the task" > "$d/h"; echo "rewrote restored copy"; exec sleep 600
fi
`+handler(`ln -f `+a.sentinel+`/sub/data "$d/h"`), "restarts=1")
		al := a.running(t)
		a.logged(t, al.ID, "ready")
		a.checkpoint(t, al.ID, "Checkpoint saved (on demand)")
		// Restart the task in place: it restores the checkpoint and
		// rewrites the restored file.
		_, err := a.c.CLI(t, "alloc", "restart", al.ID, task)
		must.NoError(t, err)
		a.logged(t, al.ID, "rewrote restored copy")
		a.untouched(t)
	})
}

// TestStore_HugeAndDeepCheckpoints: a checkpoint nested 200 directories
// deep with 2000 files commits and restores whole; so does one that adds a
// 256 GiB sparse file, within kill_timeout = 30s. Expected: the deep one is
// saved; on a restart the stop checkpoint with the huge file is saved too
// (its holes are neither read nor stored: it used to hash for minutes, and
// the stop's commit gave up at the kill timeout; it takes about a second on
// an idle machine, and the 30 s leave room for a loaded CI machine, where
// 5 s were once not enough), and the restarted task
// finds the deep tree whole and the huge file at its size, with no block of
// disk (restore keeps holes).
func TestStore_HugeAndDeepCheckpoints(t *testing.T) {
	a := newAdversary(t)
	a.run(t, `d=$CARAVAN_CHECKPOINT_DIR
if [ "$CARAVAN_CHECKPOINT_GENERATION" != 0 ]; then
  p=$d; i=0; while [ $i -lt 200 ]; do p=$p/d; i=$((i+1)); done
  echo "restored files=$(ls "$d" | grep -c '^f') leaf=$(cat "$p/leaf")"
  [ -e "$d/huge" ] && echo "huge=$(stat -c %s "$d/huge") blocks=$(stat -c %b "$d/huge")"
  exec sleep 600
fi
`+handler(`if [ "$seq" -eq 1 ]; then
    p=$d; i=0; while [ $i -lt 200 ]; do p=$p/d; i=$((i+1)); done; mkdir -p "$p"; echo deep > "$p/leaf"
    i=0; while [ $i -lt 2000 ]; do echo $i > "$d/f$i"; i=$((i+1)); done
  else truncate -s 256G "$d/huge"; fi`), "restarts=1", "kill_timeout=30s")
	al := a.running(t)
	a.logged(t, al.ID, "ready")
	a.checkpoint(t, al.ID, "Checkpoint saved (on demand)")
	gen := a.newest(t)

	start := time.Now()
	_, err := a.c.CLI(t, "alloc", "restart", al.ID, task)
	must.NoError(t, err)
	a.logged(t, al.ID, "restored files=2000 leaf=deep")
	a.logged(t, al.ID, "huge=274877906944 blocks=0")
	took := time.Since(start)
	must.Less(t, 2*time.Minute, took, must.Sprintf("restart took %s with kill_timeout = 30s", took))
	a.event(t, al.ID, "Checkpoint saved (stop)")
	must.Eq(t, gen+1, a.newest(t))
	a.untouched(t)
}

// TestStore_NewlineFileNames: file names with newlines (and other odd
// bytes) round-trip through commit and restore. Expected: the restarted
// task finds the same names and contents.
func TestStore_NewlineFileNames(t *testing.T) {
	a := newAdversary(t)
	a.run(t, `d=$CARAVAN_CHECKPOINT_DIR
if [ "$CARAVAN_CHECKPOINT_GENERATION" != 0 ]; then
  n=$(printf 'a\nb')
  if [ "$(cat "$d/$n")" = "newline" ] && [ "$(cat "$d/tab	x")" = "tab" ]; then echo "names ok"; else echo "names lost"; ls -la "$d"; fi
  exec sleep 600
fi
`+handler(`n=$(printf 'a\nb'); echo newline > "$d/$n"; echo tab > "$d/tab	x"`), "restarts=1")
	al := a.running(t)
	a.logged(t, al.ID, "ready")
	a.checkpoint(t, al.ID, "Checkpoint saved (on demand)")
	_, err := a.c.CLI(t, "alloc", "restart", al.ID, task)
	must.NoError(t, err)
	a.logged(t, al.ID, "names ok")
	a.untouched(t)
}
