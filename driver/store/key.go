package store

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// maxPartLen bounds one escaped path component (most file systems allow 255).
const maxPartLen = 255

// GroupSlot is the last key part of a key shared by a whole task group
// (Key.Shared), in place of an allocation index.
const GroupSlot = "group"

// incarnationSep separates the escaped job part from the job's incarnation
// in the key's job directory ("train@1042"). escapePart never emits it, so
// the mapping stays injective.
const incarnationSep = "@"

// Key names one series of checkpoint generations:
// namespace/job[@incarnation]/group/task/slot, where slot is the allocation
// index, or "group" for a key the whole task group shares. A replacement
// allocation (same index, on any node) finds its predecessor's checkpoints
// under the same key.
type Key struct {
	Namespace, Job, Group, Task string
	// Index is the allocation index of a per-allocation key; ignored when
	// Shared.
	Index int
	// Shared makes the key one checkpoint series for the whole task group:
	// its last part is GroupSlot instead of an index.
	Shared bool
	// Incarnation binds the key to one incarnation of its job (the driver
	// uses the Nomad job's create index), so a job purged and submitted
	// again under the same ID does not find the old job's checkpoints.
	// Empty leaves the key unbound (an explicit key name). Only bytes in
	// [A-Za-z0-9_-] are allowed.
	Incarnation string
}

// String returns the key as namespace/job[@incarnation]/group/task/slot with
// escaped parts; ParseKey reads it back.
func (k Key) String() string {
	parts, _ := k.Parts()
	return strings.Join(parts, "/")
}

// Validate reports whether the key can name a checkpoint: every part is
// non-empty and at most 255 bytes once escaped, and the index is not negative.
// Any byte is allowed in a part: separators, dots and other unsafe bytes are
// escaped (see escapePart), so no key can leave its directory.
func (k Key) Validate() error {
	_, err := k.Parts()
	return err
}

func (k Key) Parts() ([]string, error) {
	named := []struct{ field, v string }{
		{"namespace", k.Namespace}, {"job", k.Job}, {"group", k.Group}, {"task", k.Task},
	}
	out := make([]string, 0, 5)
	for _, n := range named {
		if n.v == "" {
			return nil, fmt.Errorf("%w: key %s is empty", ErrInvalid, n.field)
		}
		e := escapePart(n.v)
		if n.field == "job" && k.Incarnation != "" {
			if !validIncarnation(k.Incarnation) {
				return nil, fmt.Errorf("%w: key incarnation %q may only hold [A-Za-z0-9_-]", ErrInvalid, k.Incarnation)
			}
			e += incarnationSep + k.Incarnation
		}
		if len(e) > maxPartLen {
			return nil, fmt.Errorf("%w: key %s is too long (%d bytes escaped, max %d)",
				ErrInvalid, n.field, len(e), maxPartLen)
		}
		out = append(out, e)
	}
	if k.Shared {
		return append(out, GroupSlot), nil
	}
	if k.Index < 0 {
		return nil, fmt.Errorf("%w: key index must be >= 0, got %d", ErrInvalid, k.Index)
	}
	return append(out, strconv.Itoa(k.Index)), nil
}

// dir returns the key's directory below root.
func (k Key) dir(root string) (string, error) {
	parts, err := k.Parts()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{root}, parts...)...), nil
}

// ParseKey reads a key in the form String writes
// (namespace/job[@incarnation]/group/task/slot, escaped parts). It accepts
// only the canonical form, so ParseKey(s).String() == s.
func ParseKey(s string) (Key, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 {
		return Key{}, fmt.Errorf("%w: key %q: want namespace/job/group/task/slot (5 parts), got %d",
			ErrInvalid, s, len(parts))
	}
	var k Key
	job := parts[1]
	if i := strings.LastIndex(job, incarnationSep); i >= 0 {
		if !validIncarnation(job[i+1:]) {
			return Key{}, fmt.Errorf("%w: key %q: bad job incarnation %q", ErrInvalid, s, job[i+1:])
		}
		k.Incarnation, job = job[i+1:], job[:i]
	}
	fields := []struct {
		name string
		dst  *string
		v    string
	}{{"namespace", &k.Namespace, parts[0]}, {"job", &k.Job, job}, {"group", &k.Group, parts[2]}, {"task", &k.Task, parts[3]}}
	for _, f := range fields {
		v, err := unescapePart(f.v)
		if err != nil {
			return Key{}, fmt.Errorf("%w: key %q: %s: %w", ErrInvalid, s, f.name, err)
		}
		*f.dst = v
	}
	if parts[4] == GroupSlot {
		k.Shared = true
	} else if n, err := strconv.Atoi(parts[4]); err == nil && n >= 0 {
		k.Index = n
	} else {
		return Key{}, fmt.Errorf("%w: key %q: slot %q is neither an allocation index nor %q",
			ErrInvalid, s, parts[4], GroupSlot)
	}
	if got := k.String(); got != s {
		return Key{}, fmt.Errorf("%w: key %q is not in canonical form (%q)", ErrInvalid, s, got)
	}
	return k, nil
}

// escapePart maps an arbitrary string to a single safe path component,
// injectively: bytes in [A-Za-z0-9_-] and '.' are kept, except a '.' in first
// position; every other byte (including '%', '/', '@', NUL and non-ASCII)
// becomes %XX with upper-case hex. The result never contains a separator,
// never is "." or "..", and never starts with '.', which keeps the store's
// own dot-directories out of every key's way.
func escapePart(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		safe := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || (c == '.' && i > 0)
		if safe {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

func validIncarnation(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// unescapePart inverts escapePart for its canonical output.
func unescapePart(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty part")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape %q in %q", s[i:i+3], s)
		}
		b.WriteByte(byte(n))
		i += 2
	}
	out := b.String()
	if escapePart(out) != s {
		return "", fmt.Errorf("%q is not an escaped key part", s)
	}
	return out, nil
}
