package interference

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestOccupancyFile_RoundTrip(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadFile(dir, "GPU-a")
	must.True(t, errors.Is(err, fs.ErrNotExist))
	sm := uint32(25)
	o := &Occupancy{Simulated: true, GPU: "GPU-a", MPS: true, Updated: time.Unix(10, 0).UTC(),
		Holders: []Holder{{Reservation: "r1", PID: 7, Shares: 2, Fraction: 0.5, SMPercent: &sm}}}
	must.NoError(t, WriteFile(dir, o))
	got, err := ReadFile(dir, "GPU-a")
	must.NoError(t, err)
	must.Eq(t, o, got)
	// No temporary file is left behind.
	ents, err := os.ReadDir(dir)
	must.NoError(t, err)
	must.SliceLen(t, 1, ents)
}

func TestOccupancyFile_Refusals(t *testing.T) {
	dir := t.TempDir()
	must.NoError(t, os.WriteFile(Path(dir, "GPU-x"), []byte("{not json"), 0o644))
	_, err := ReadFile(dir, "GPU-x")
	must.ErrorContains(t, err, "occupancy-GPU-x.json")
	must.NoError(t, WriteFile(dir, &Occupancy{GPU: "GPU-y"}))
	must.NoError(t, os.Rename(Path(dir, "GPU-y"), Path(dir, "GPU-z")))
	_, err = ReadFile(dir, "GPU-z")
	must.ErrorContains(t, err, "names GPU GPU-y")
	must.NoError(t, os.Symlink(Path(dir, "GPU-z"), Path(dir, "GPU-l")))
	_, err = ReadFile(dir, "GPU-l")
	must.ErrorContains(t, err, "not a regular file")
}
