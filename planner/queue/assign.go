package queue

import "fmt"

// assigner maps a job to its queue.
type assigner struct {
	qs      []Queue
	byNS    map[string]int
	byName  map[string]int
	allowed map[string]map[string]bool // queue -> namespaces that may choose it ("*" any)
	def     int
}

func newAssigner(qs []Queue, def int) *assigner {
	a := &assigner{qs: qs, byNS: map[string]int{}, byName: map[string]int{}, allowed: map[string]map[string]bool{}, def: def}
	for i, q := range qs {
		a.byName[q.Name] = i
		ok := map[string]bool{}
		for _, ns := range q.Namespaces {
			if _, dup := a.byNS[ns]; !dup {
				a.byNS[ns] = i
			}
			ok[ns] = true
		}
		for _, ns := range q.Allow {
			ok[ns] = true
		}
		a.allowed[q.Name] = ok
	}
	return a
}

// assign returns the job's queue and, when its MetaKey choice was refused,
// why.
func (a *assigner) assign(namespace, requested string) (int, string) {
	home, member := a.byNS[namespace]
	if !member {
		home = a.def
	}
	if requested == "" || requested == a.qs[home].Name {
		return home, ""
	}
	i, ok := a.byName[requested]
	if !ok {
		return home, fmt.Sprintf("meta %s=%q names no queue; in its namespace's queue %q", MetaKey, requested, a.qs[home].Name)
	}
	if ok := a.allowed[requested]; !ok[namespace] && !ok["*"] {
		return home, fmt.Sprintf("meta %s=%q: namespace %q may not use that queue; in its namespace's queue %q",
			MetaKey, requested, namespace, a.qs[home].Name)
	}
	return i, ""
}

// Assign returns the name of the queue a job of namespace with the given
// MetaKey value runs in, and why its choice was refused (empty if it was
// not). It does not validate c.
func (c *Config) Assign(namespace, requested string) (string, string) {
	qs, def := c.withDefault()
	i, why := newAssigner(qs, def).assign(namespace, requested)
	return qs[i].Name, why
}
