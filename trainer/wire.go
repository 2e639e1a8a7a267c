package trainer

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"
)

// The trainer's own gradient-exchange protocol between parameter servers
// and workers (unrelated to the planner's progress wire): gob-encoded
// messages over TCP, each connection strictly request/reply except the
// coordinator's control connections, where members may also send Leave.

type msgKind uint8

const (
	msgHello    msgKind = iota + 1 // member -> coordinator: Role, Addr (a server's data address)
	msgWelcome                     // coordinator -> member: Config
	msgAssign                      // coordinator -> worker: Step, Epoch, Shards, Layout
	msgDone                        // worker -> coordinator: Step, Epoch, Shards, Losses, Stats (or Err)
	msgPull                        // worker -> server: Step, Epoch
	msgParams                      // server -> worker: Step, Lo, A (parameters)
	msgPush                        // worker -> server: Step, Epoch, Shards, A (their gradient slices, concatenated)
	msgAck                         // reply without data
	msgGetShard                    // coordinator -> server: Step
	msgShard                       // server -> coordinator: Step, Lo, Hi, A (params), B (velocity)
	msgSetShard                    // coordinator -> server: Step, Epoch, Lo, Hi, A, B
	msgLeave                       // server -> coordinator: stopping, take my shard
	msgRelease                     // coordinator -> server: your shard is taken; stop
	msgFinish                      // coordinator -> member: training finished
	msgError                       // reply: Err
)

type role uint8

const (
	roleWorker role = iota + 1
	roleServer
)

// Range is one parameter server's slice [Lo,Hi) of the flat parameters.
type Range struct {
	Addr   string
	Lo, Hi int
}

// floats gob-encodes as raw little-endian IEEE-754 bits: exact and fast.
type floats []float64

func (f floats) GobEncode() ([]byte, error) {
	b := make([]byte, 8*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b, nil
}

func (f *floats) GobDecode(b []byte) error {
	if len(b)%8 != 0 {
		return fmt.Errorf("float vector of %d bytes", len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	*f = out
	return nil
}

type message struct {
	Kind   msgKind
	Role   role
	Addr   string
	Step   uint64
	Epoch  uint64
	Shards []int
	Lo, Hi int
	A, B   floats
	Losses []float64
	// Stats are the gradient statistics of a worker's micro-shards (msgDone).
	Stats  *GradStats
	Layout []Range
	Config *Config
	Err    string
}

// ioTimeout bounds one message's write and a reply's wait.
const ioTimeout = 15 * time.Second

// conn is one gob stream over TCP; send is safe for concurrent use.
type conn struct {
	nc  net.Conn
	bw  *bufio.Writer
	enc *gob.Encoder
	dec *gob.Decoder
	wmu sync.Mutex
}

func newConn(nc net.Conn) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	bw := bufio.NewWriterSize(nc, 64<<10)
	return &conn{nc: nc, bw: bw, enc: gob.NewEncoder(bw), dec: gob.NewDecoder(bufio.NewReaderSize(nc, 64<<10))}
}

func dialConn(ctx context.Context, addr string) (*conn, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newConn(nc), nil
}

func (c *conn) send(m *message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if err := c.enc.Encode(m); err != nil {
		return err
	}
	return c.bw.Flush()
}

// recv blocks for the next message (no deadline: control connections idle).
func (c *conn) recv() (*message, error) {
	var m message
	if err := c.dec.Decode(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

// call sends m and waits for the reply, turning msgError into an error.
func (c *conn) call(m *message) (*message, error) {
	if err := c.send(m); err != nil {
		return nil, err
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	defer c.nc.SetReadDeadline(time.Time{})
	r, err := c.recv()
	if err != nil {
		return nil, err
	}
	if r.Kind == msgError {
		return nil, &remoteError{r.Err}
	}
	return r, nil
}

func (c *conn) close() { _ = c.nc.Close() }

// remoteError is an error the peer answered with (the connection is fine).
type remoteError struct{ msg string }

func (e *remoteError) Error() string { return e.msg }

func isRemote(err error) bool {
	var r *remoteError
	return errors.As(err, &r)
}

func errorReply(format string, args ...any) *message {
	return &message{Kind: msgError, Err: fmt.Sprintf(format, args...)}
}

// splitRanges divides n parameters into len(addrs) contiguous ranges.
func splitRanges(n int, addrs []string) []Range {
	out := make([]Range, len(addrs))
	for i, a := range addrs {
		out[i] = Range{Addr: a, Lo: i * n / len(addrs), Hi: (i + 1) * n / len(addrs)}
	}
	return out
}
