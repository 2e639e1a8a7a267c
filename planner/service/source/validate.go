package source

import (
	"fmt"
	"sort"
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Validate checks a job's caravan_* meta before submission, as the planner
// reads it once the job runs, and returns every error, each naming its key
// (`caravan validate`). Unlike the planner, which ignores them with a
// warning, it also refuses unknown caravan_* job meta keys (with the known
// key they probably meant) and caravan_* keys in group or task meta, which
// the planner never reads. A job without caravan_* meta has nothing to
// check.
func Validate(job *nomadapi.Job) []error {
	var errs []error
	if hasCaravanKey(job.Meta) {
		if _, err := ParseSpec(job); err != nil {
			errs = append(errs, unjoin(err)...)
		}
		for _, w := range unknownKeys(job.Meta, "unknown meta key %q: the planner does not read it, so it sets nothing (a typo?)") {
			errs = append(errs, fmt.Errorf("%w: %s", ErrBadMeta, w))
		}
	}
	for _, tg := range job.TaskGroups {
		group := deref(tg.Name)
		for _, k := range caravanKeys(tg.Meta) {
			errs = append(errs, fmt.Errorf("%w: group %q meta %s: the planner reads caravan_* keys from the job's meta only",
				ErrBadMeta, group, k))
		}
		for _, task := range tg.Tasks {
			for _, k := range caravanKeys(task.Meta) {
				errs = append(errs, fmt.Errorf("%w: group %q task %q meta %s: the planner reads caravan_* keys from the job's meta only",
					ErrBadMeta, group, task.Name, k))
			}
		}
	}
	return errs
}

func hasCaravanKey(meta map[string]string) bool { return len(caravanKeys(meta)) > 0 }

// caravanKeys are meta's caravan_* keys, sorted.
func caravanKeys(meta map[string]string) []string {
	var out []string
	for k := range meta {
		if strings.HasPrefix(strings.ToLower(k), "caravan_") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// unjoin splits an errors.Join result into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
