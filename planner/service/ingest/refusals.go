package ingest

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultRefusalLogEvery is how often, at most, the handler logs that it
// keeps refusing reports it cannot verify (an outage of Nomad or its JWKS).
const DefaultRefusalLogEvery = time.Minute

// refusalLog logs the reports refused with 503 (their token cannot be
// verified now) at a bounded rate: the first refusal of an outage at once,
// then one summary line per interval with the count, and one line when a
// token verifies again. An outage refusing 10 reports a second thus logs
// about one line a minute, not 600.
type refusalLog struct {
	mu      sync.Mutex
	since   time.Time // first refusal of the outage; zero: none
	logged  time.Time // last line
	pending int       // refused since the last line
	total   int       // refused in this outage
}

// refused records one refusal at now and logs if due.
func (l *refusalLog) refused(log hclog.Logger, every time.Duration, now time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if l.since.IsZero() {
		l.since, l.logged = now, now
		log.Warn("cannot verify progress tokens now: refusing reports with 503 (logged again at most every interval while it lasts)",
			"error", err, "interval", every.String())
		return
	}
	l.pending++
	if now.Sub(l.logged) >= every {
		log.Warn("still cannot verify progress tokens", "error", err, "refused", l.pending,
			"refused_total", l.total, "since", l.since.UTC().Format(time.RFC3339))
		l.logged, l.pending = now, 0
	}
}

// verified records that a token verified at now, ending an outage.
func (l *refusalLog) verified(log hclog.Logger, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since.IsZero() {
		return
	}
	log.Info("progress tokens verify again", "refused_total", l.total, "outage", now.Sub(l.since).String())
	l.since, l.logged, l.pending, l.total = time.Time{}, time.Time{}, 0, 0
}
