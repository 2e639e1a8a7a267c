package trainer

import (
	"fmt"
	"time"
)

// gather assembles the full state as of the coordinator's step from the
// slices' holders (a holder one step ahead answers with its previous
// slice, so the state is always that of a step boundary).
func (co *coordinator) gather() (*State, error) {
	n := ParamCount(co.cfg)
	st := &State{Step: co.step, Params: make([]float64, n), Velocity: make([]float64, n)}
	for i, m := range co.layout {
		var r *message
		var err error
		if m == nil {
			r = co.local.get(co.step)
		} else {
			r, err = co.call(m, &message{Kind: msgGetShard, Step: co.step})
		}
		if err == nil && r.Kind == msgError {
			err = &remoteError{r.Err}
		}
		if err == nil && (r.Lo != co.ranges()[i].Lo || len(r.A) != r.Hi-r.Lo || len(r.B) != len(r.A)) {
			err = fmt.Errorf("slice [%d,%d) does not match the layout", r.Lo, r.Hi)
		}
		if err != nil {
			return nil, fmt.Errorf("gather slice %d: %w", i, err)
		}
		copy(st.Params[r.Lo:], r.A)
		copy(st.Velocity[r.Lo:], r.B)
	}
	return st, nil
}

// distribute installs st over the coordinator and every shard server not
// leaving, under a new epoch, and restarts st.Step's work. A server that
// cannot take its slice is dropped and the state laid out again.
func (co *coordinator) distribute(st *State) {
	for {
		co.step = st.Step
		co.epoch++
		co.layout = []*member{nil}
		for _, m := range co.servers {
			if !m.leaving {
				co.layout = append(co.layout, m)
			}
		}
		if co.install(st) {
			break
		}
	}
	if co.step < co.cfg.Steps {
		co.startStep()
	}
}

// install sends each holder its slice; false when one failed (and was
// removed from the servers).
func (co *coordinator) install(st *State) bool {
	for i, r := range co.ranges() {
		set := &message{Kind: msgSetShard, Step: st.Step, Epoch: co.epoch, Lo: r.Lo, Hi: r.Hi,
			A: st.Params[r.Lo:r.Hi], B: st.Velocity[r.Lo:r.Hi], Config: &co.cfg}
		m := co.layout[i]
		if m == nil {
			co.local.set(co.cfg, set)
			continue
		}
		if _, err := co.call(m, set); err != nil {
			fmt.Fprintf(co.o.Out, "ps %s cannot take its slice: %v\n", m.addr, err)
			co.servers = removeMember(co.servers, m)
			return false
		}
	}
	return true
}

// reshard lays the current state out again over the current servers (a
// server joined or is leaving): the step in flight is done again.
func (co *coordinator) reshard() {
	st, err := co.gather()
	if err != nil {
		co.replay(err)
		return
	}
	co.distribute(st)
	fmt.Fprintf(co.o.Out, "resharded step=%d ps=%d epoch=%d\n", co.step, len(co.layout), co.epoch)
}

// replay is the fallback when a slice is lost (a server vanished without
// handing it off): training continues from the last checkpoint, or from
// the start, replaying deterministically.
func (co *coordinator) replay(cause error) {
	st, err := co.restore()
	if err != nil {
		st = nil
		fmt.Fprintf(co.o.Out, "cannot reload the checkpoint (%v): starting over\n", err)
	}
	if st == nil {
		m := NewModel(co.cfg)
		st = &State{Params: m.Params, Velocity: m.Velocity}
	}
	fmt.Fprintf(co.o.Out, "state lost (%v): replaying from step=%d\n", cause, st.Step)
	co.distribute(st)
}

// call sends a request to a shard server and waits for its reply.
func (co *coordinator) call(m *member, req *message) (*message, error) {
	if err := m.c.send(req); err != nil {
		return nil, err
	}
	select {
	case r := <-m.replies:
		if r.Kind == msgError {
			return nil, &remoteError{r.Err}
		}
		return r, nil
	case <-m.gone:
		return nil, fmt.Errorf("ps %s disconnected", m.addr)
	case <-time.After(ioTimeout):
		m.c.close()
		return nil, fmt.Errorf("ps %s did not answer in %s", m.addr, ioTimeout)
	}
}

// accept routes a new connection: members say hello, workers' data
// connections go to the local slice.
func (co *coordinator) accept(c *conn, first *message) {
	if first.Kind != msgHello {
		co.local.serveData(c, first)
		return
	}
	m := &member{role: first.Role, addr: first.Addr, c: c, replies: make(chan *message, 1), gone: make(chan struct{})}
	if err := c.send(&message{Kind: msgWelcome, Config: &co.cfg}); err != nil {
		c.close()
		return
	}
	co.events <- event{kind: evJoin, m: m}
	go co.read(m)
}

// read turns a member's messages into events (or replies) until it goes.
func (co *coordinator) read(m *member) {
	defer func() {
		close(m.gone)
		m.c.close()
		co.events <- event{kind: evGone, m: m}
	}()
	for {
		msg, err := m.c.recv()
		if err != nil {
			return
		}
		switch {
		case msg.Kind == msgDone:
			co.events <- event{kind: evDone, m: m, msg: msg}
		case msg.Kind == msgLeave:
			co.events <- event{kind: evLeave, m: m}
		default:
			m.replies <- msg
		}
	}
}
