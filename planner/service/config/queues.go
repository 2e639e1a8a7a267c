package config

import (
	"errors"
	"fmt"

	"github.com/caravan-nomad/caravan/planner/queue"
)

// fileQueue is one `queue "name" { ... }` block. GPU amounts are strings
// so that "0.5" and 2 both read, and a typo is an error naming the field.
type fileQueue struct {
	Name           string   `hcl:"name,label"`
	Namespaces     []string `hcl:"namespaces,optional"`
	Guarantee      *string  `hcl:"guarantee,optional"`
	BorrowingLimit *string  `hcl:"borrowing_limit,optional"`
	LendingLimit   *string  `hcl:"lending_limit,optional"`
	Weight         *float64 `hcl:"weight,optional"`
	Allow          []string `hcl:"allow_namespaces,optional"`
	// Rightsize is the queue's right-sizing mode for jobs without a
	// caravan_rightsize meta key: "recommend" (the default) or "apply".
	Rightsize *string `hcl:"rightsize,optional"`
}

// Right-sizing modes of a queue's rightsize setting (the same words as the
// caravan_rightsize job meta).
const (
	RightsizeRecommend = "recommend"
	RightsizeApply     = "apply"
)

// fileQueues is the `queues { ... }` block: settings of all queues.
type fileQueues struct {
	Default *string `hcl:"default,optional"`
	Reclaim *bool   `hcl:"reclaim,optional"`
}

// applyQueues appends the file's queues to c.Queues, reporting every bad
// GPU amount at once, each naming its queue and field.
func applyQueues(c *Config, filename string, qs []fileQueue, settings *fileQueues) error {
	var errs []error
	amount := func(q, field string, s *string, dst *int) bool {
		if s == nil {
			return true
		}
		v, err := queue.ParseGPUs(fmt.Sprintf("queue %q: %s", q, field), *s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filename, err))
			return false
		}
		*dst = v
		return true
	}
	for _, fq := range qs {
		q := queue.Queue{Name: fq.Name, Namespaces: fq.Namespaces, Allow: fq.Allow,
			BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1}
		guaranteeOK := amount(fq.Name, "guarantee", fq.Guarantee, &q.Guarantee)
		amount(fq.Name, "borrowing_limit", fq.BorrowingLimit, &q.BorrowLimit)
		if amount(fq.Name, "lending_limit", fq.LendingLimit, &q.LendLimit) && !guaranteeOK {
			// The file is refused for its guarantee already; a lending
			// limit checked against the guarantee it could not set
			// would be a second, false error.
			q.LendLimit = queue.Unlimited
		}
		set(fq.Weight, &q.Weight)
		if fq.Rightsize != nil {
			switch v := *fq.Rightsize; v {
			case RightsizeRecommend, RightsizeApply:
				if c.QueueRightsize == nil {
					c.QueueRightsize = map[string]string{}
				}
				c.QueueRightsize[fq.Name] = v
			default:
				errs = append(errs, fmt.Errorf("%s: queue %q: rightsize: want %q or %q, got %q",
					filename, fq.Name, RightsizeRecommend, RightsizeApply, v))
			}
		}
		c.Queues.Queues = append(c.Queues.Queues, q)
	}
	if settings != nil {
		set(settings.Default, &c.Queues.Default)
		if settings.Reclaim != nil {
			c.Queues.NoReclaim = !*settings.Reclaim
		}
	}
	return errors.Join(errs...)
}
