package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrTimeout is what a wait that ran out of time is (errors.Is).
var ErrTimeout = errors.New("timed out")

// TimeoutError is a wait's end at its deadline.
type TimeoutError struct {
	// What names what was awaited ("" for a bare Poll).
	What  string
	After time.Duration
	// Last is the condition's last error: why it did not hold.
	Last error
}

func (e *TimeoutError) Error() string {
	if e.What == "" {
		return fmt.Sprintf("still failing after %s: %v", e.After, e.Last)
	}
	return fmt.Sprintf("timed out after %s waiting for %s (last error: %v)", e.After, e.What, e.Last)
}

func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }
func (e *TimeoutError) Unwrap() error        { return e.Last }

// Poll calls cond every interval until it returns nil, ctx ends or timeout
// passes. At the deadline it returns a *TimeoutError holding cond's last
// error; when ctx ends first, ctx's error.
func Poll(parent context.Context, every, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return parent.Err()
			}
			return &TimeoutError{After: timeout, Last: err}
		case <-tick.C:
		}
	}
}

// errNotYet is a condition that does not hold yet and names no reason.
var errNotYet = errors.New("not yet")

// sayEvery is how often a wait that goes on says so.
const sayEvery = 15 * time.Second

// Wait calls f every PollEvery until it reports done, ctx ends or timeout
// passes; what names what is awaited, in the progress lines (every 15 s)
// and in the error.
func (c *Cluster) Wait(ctx context.Context, what string, timeout time.Duration, f func() (bool, error)) error {
	started, said := time.Now(), time.Now()
	err := Poll(ctx, c.pollEvery(), timeout, func() error {
		done, err := f()
		if err == nil && done {
			return nil
		}
		if time.Since(said) > sayEvery {
			c.say("... still waiting for %s (%s)", what, time.Since(started).Round(time.Second))
			said = time.Now()
		}
		if err == nil {
			return errNotYet
		}
		return err
	})
	var te *TimeoutError
	if errors.As(err, &te) {
		te.What = what
		if te.Last == errNotYet {
			te.Last = nil
		}
	}
	return err
}

func (c *Cluster) pollEvery() time.Duration {
	if c.PollEvery > 0 {
		return c.PollEvery
	}
	return 500 * time.Millisecond
}
