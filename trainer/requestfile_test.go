package trainer

import (
	"syscall"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

// TestMain_RequestFileAsksForCheckpoint: a sequence in the sidecar's request
// file above the one found at start asks for a checkpoint, as the
// checkpoint signal does; the request left in the directory by the run
// before (restored with the checkpoint) does not.
func TestMain_RequestFileAsksForCheckpoint(t *testing.T) {
	dir := t.TempDir()
	must.NoError(t, protocol.WriteRequest(dir, &protocol.Request{Sequence: 7}))
	p := startTrainer(t, dir, "-samples 512 -steps 100000 -log-every 0 -step-delay 2ms")
	p.waitOutput(t, "training ")
	must.NoError(t, protocol.WriteRequest(dir, &protocol.Request{Sequence: 8}))
	waitSequence(t, dir, 1)
	must.NoError(t, protocol.WriteRequest(dir, &protocol.Request{Sequence: 9}))
	waitSequence(t, dir, 2)
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM)) // not the checkpoint signal: no marker
	_ = p.cmd.Wait()
	m, err := protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m.Sequence, must.Sprint("one checkpoint per new request, none for the old one"))
}

// TestElasticCLI_RequestFileAsksForCheckpoint: the parameter-server and
// worker modes honour the sidecar's request file as the single process
// does: the coordinator saves the state, a shard server and a worker (which
// hold none of their own) answer with the driver's skip marker.
func TestElasticCLI_RequestFileAsksForCheckpoint(t *testing.T) {
	cases := []struct {
		name, args, started string
		skip                bool
	}{
		{"coordinator", "ps -index 0 -samples 512 -steps 100000 -log-every 0", "training ", false},
		{"shard server", "ps -index 1 -coordinator 127.0.0.1:1", "serving role=ps", true},
		{"worker", "worker -coordinator 127.0.0.1:1", "worker starting", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			must.NoError(t, protocol.WriteRequest(dir, &protocol.Request{Sequence: 7}))
			p := startTrainer(t, dir, tc.args)
			p.waitOutput(t, tc.started)
			for i, seq := range []uint64{8, 9} {
				must.NoError(t, protocol.WriteRequest(dir, &protocol.Request{Sequence: seq}))
				waitSequence(t, dir, uint64(i+1))
			}
			must.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			_ = p.cmd.Wait()
			m, err := protocol.ReadMarker(dir)
			must.NoError(t, err)
			must.Eq(t, uint64(2), m.Sequence, must.Sprint("one checkpoint per new request, none for the old one"))
			must.Eq(t, tc.skip, m.Skip)
		})
	}
}
