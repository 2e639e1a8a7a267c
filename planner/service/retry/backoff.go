// Package retry holds the planner's backoff: how long to wait after a failed
// call to Nomad or Consul before trying again.
package retry

import (
	"context"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// Backoff doubles its delay after each failure, from Min up to Max, and
// starts over after Reset. The zero value is not usable; use New.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// New returns a backoff from min to max.
func New(min, max time.Duration) *Backoff {
	return &Backoff{Min: min, Max: max, next: min}
}

// Next returns the delay to wait now and doubles the following one.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next *= 2
	if b.next > b.Max {
		b.next = b.Max
	}
	return d
}

// Reset starts over from Min after a success.
func (b *Backoff) Reset() { b.next = b.Min }

// Wait sleeps for the next delay on clk; it returns ctx.Err() if the context
// ends first.
func (b *Backoff) Wait(ctx context.Context, clk clock.Clock) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-clk.After(b.Next()):
		return nil
	}
}
