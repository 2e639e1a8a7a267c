package trainer

import (
	"bytes"
	"encoding/gob"
	"net"
	"sync"
)

// joinListener wraps a coordinator's listener to tell the test when members
// are queued to join: the coordinator reads a member's hello, writes its
// welcome, queues the join event and only then starts reading the member's
// connection again. A Read on a hello connection after the welcome was
// written therefore comes after the join is queued; the coordinator handles
// its events in order, so a queued join is handled before the end of the
// next step (whose shard reports are queued after it).
type joinListener struct {
	net.Listener
	mu     sync.Mutex
	queued int
}

func (l *joinListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &joinConn{Conn: c, l: l}, nil
}

// joinsQueued is how many members' joins are queued (or handled).
func (l *joinListener) joinsQueued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}

// joinConn decodes the first message read on a connection to tell a
// member's (hello) from a worker's data connection.
type joinConn struct {
	net.Conn
	l                       *joinListener
	first                   bytes.Buffer
	decided, hello, welcome bool
	counted                 bool
}

func (c *joinConn) Read(p []byte) (int, error) {
	c.l.mu.Lock()
	if c.hello && c.welcome && !c.counted {
		c.counted = true
		c.l.queued++
	}
	c.l.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if !c.decided && n > 0 {
		c.first.Write(p[:n])
		var m message
		if gob.NewDecoder(bytes.NewReader(c.first.Bytes())).Decode(&m) == nil {
			c.decided, c.hello = true, m.Kind == msgHello
		}
	}
	return n, err
}

func (c *joinConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	if c.hello {
		c.welcome = true
	}
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}
