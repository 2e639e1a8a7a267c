// Package clock is the planner's injectable notion of time: the real clock in
// production, a manually advanced one in tests.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and waits.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Real is the system clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now() }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a clock that moves only when Advance is called.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	added   chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, added: make(chan struct{}, 1)}
}

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	select {
	case f.added <- struct{}{}:
	default:
	}
	return ch
}

// Waiters reports how many After calls are pending.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil returns once at least n After calls are pending, so a test can
// advance the clock knowing the code under test is waiting on it.
func (f *Fake) BlockUntil(n int) {
	for {
		if f.Waiters() >= n {
			return
		}
		select {
		case <-f.added:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Advance moves the clock forward by d and fires every timer that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	var keep []waiter
	for _, w := range f.waiters {
		if !w.at.After(now) {
			w.ch <- now
			continue
		}
		keep = append(keep, w)
	}
	f.waiters = keep
	f.mu.Unlock()
}
