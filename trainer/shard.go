package trainer

import (
	"net"
	"sync"
)

// shard is one parameter server's slice of the model: parameters and
// momentum of [lo,hi) at step, the slice as it was one step earlier (so a
// micro-shard re-done after its worker vanished sees the same parameters),
// and the micro-shard gradients received for the current step.
type shard struct {
	mu           sync.Mutex
	cfg          Config
	ready        bool
	epoch, step  uint64
	lo, hi       int
	params, vel  []float64
	prevP, prevV []float64
	grads        [][]float64
	got          int
	sum          []float64
}

// set installs a slice (msgSetShard) and drops pending gradients.
func (s *shard) set(cfg Config, m *message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg, s.ready = cfg, true
	s.epoch, s.step, s.lo, s.hi = m.Epoch, m.Step, m.Lo, m.Hi
	s.params, s.vel = append([]float64(nil), m.A...), append([]float64(nil), m.B...)
	s.prevP, s.prevV = nil, nil
	s.grads, s.got = make([][]float64, cfg.MicroShards), 0
	s.sum = make([]float64, m.Hi-m.Lo)
}

// get returns the slice as of step (the current one, or the previous one
// when this server has already applied step).
func (s *shard) get(step uint64) *message {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, v, ok := s.at(step)
	if !ok {
		return errorReply("parameter server holds step %d (ready=%t), not %d", s.step, s.ready, step)
	}
	return &message{Kind: msgShard, Step: step, Lo: s.lo, Hi: s.hi,
		A: append(floats(nil), p...), B: append(floats(nil), v...)}
}

func (s *shard) at(step uint64) (params, vel []float64, ok bool) {
	switch {
	case !s.ready:
		return nil, nil, false
	case step == s.step:
		return s.params, s.vel, true
	case step+1 == s.step && s.prevP != nil:
		return s.prevP, s.prevV, true
	}
	return nil, nil, false
}

// pull answers a worker's request for the parameters of a step.
func (s *shard) pull(m *message) *message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Epoch != s.epoch {
		return errorReply("stale layout epoch %d (now %d)", m.Epoch, s.epoch)
	}
	p, _, ok := s.at(m.Step)
	if !ok {
		return errorReply("parameter server holds step %d, not %d", s.step, m.Step)
	}
	return &message{Kind: msgParams, Step: m.Step, Lo: s.lo, A: append(floats(nil), p...)}
}

// push takes micro-shard gradient slices (a worker's shards of a step);
// the last one of a step reduces them in shard order and applies the
// update before the reply, so once every worker has its replies, every
// server is at the next step.
func (s *shard) push(m *message) *message {
	s.mu.Lock()
	defer s.mu.Unlock()
	width := s.hi - s.lo
	switch {
	case m.Epoch != s.epoch:
		return errorReply("stale layout epoch %d (now %d)", m.Epoch, s.epoch)
	case m.Step < s.step:
		return &message{Kind: msgAck} // re-done shards of an applied step
	case m.Step > s.step:
		return errorReply("parameter server at step %d got a gradient of step %d", s.step, m.Step)
	case len(m.A) != len(m.Shards)*width:
		return errorReply("bad gradient: %d values for %d shards of range [%d,%d)", len(m.A), len(m.Shards), s.lo, s.hi)
	}
	for i, k := range m.Shards {
		if k < 0 || k >= len(s.grads) {
			return errorReply("bad gradient: shard %d of %d", k, len(s.grads))
		}
		if s.grads[k] == nil {
			s.grads[k] = m.A[i*width : (i+1)*width]
			s.got++
		}
	}
	if s.got == len(s.grads) {
		s.apply()
	}
	return &message{Kind: msgAck}
}

func (s *shard) apply() {
	s.prevP = append(s.prevP[:0], s.params...)
	s.prevV = append(s.prevV[:0], s.vel...)
	for i := range s.sum {
		s.sum[i] = 0
	}
	for k, g := range s.grads {
		Reduce(s.sum, g)
		s.grads[k] = nil
	}
	ApplyUpdate(s.cfg, s.params, s.vel, s.sum)
	s.step++
	s.got = 0
}

// serveData answers one worker's data connection (first is its first
// message, already read).
func (s *shard) serveData(c *conn, first *message) {
	defer c.close()
	m := first
	for {
		var r *message
		switch m.Kind {
		case msgPull:
			r = s.pull(m)
		case msgPush:
			r = s.push(m)
		default:
			r = errorReply("unexpected message %d on a data connection", m.Kind)
		}
		if err := c.send(r); err != nil {
			return
		}
		var err error
		if m, err = c.recv(); err != nil {
			return
		}
	}
}

// acceptLoop hands each new connection's first message to handle.
func acceptLoop(ln net.Listener, handle func(c *conn, first *message)) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			c := newConn(nc)
			first, err := c.recv()
			if err != nil {
				c.close()
				return
			}
			handle(c, first)
		}()
	}
}
