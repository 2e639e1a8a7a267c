package store

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// maxPartLen bounds one escaped path component (most file systems allow 255).
const maxPartLen = 255

// Key names the checkpoints of one task of one allocation index:
// namespace/job/group/task/index. A replacement allocation (same index, on
// any node) finds its predecessor's checkpoints under the same key.
type Key struct {
	Namespace, Job, Group, Task string
	Index                       int
}

// String returns the key as namespace/job/group/task/index with escaped parts.
func (k Key) String() string {
	parts, _ := k.parts()
	return strings.Join(parts, "/")
}

// Validate reports whether the key can name a checkpoint: every part is
// non-empty and at most 255 bytes once escaped, and the index is not negative.
// Any byte is allowed in a part: separators, dots and other unsafe bytes are
// escaped (see escapePart), so no key can leave its directory.
func (k Key) Validate() error {
	_, err := k.parts()
	return err
}

func (k Key) parts() ([]string, error) {
	named := []struct{ field, v string }{
		{"namespace", k.Namespace}, {"job", k.Job}, {"group", k.Group}, {"task", k.Task},
	}
	out := make([]string, 0, 5)
	for _, n := range named {
		if n.v == "" {
			return nil, fmt.Errorf("%w: key %s is empty", ErrInvalid, n.field)
		}
		e := escapePart(n.v)
		if len(e) > maxPartLen {
			return nil, fmt.Errorf("%w: key %s is too long (%d bytes escaped, max %d)",
				ErrInvalid, n.field, len(e), maxPartLen)
		}
		out = append(out, e)
	}
	if k.Index < 0 {
		return nil, fmt.Errorf("%w: key index must be >= 0, got %d", ErrInvalid, k.Index)
	}
	return append(out, strconv.Itoa(k.Index)), nil
}

// dir returns the key's directory below root.
func (k Key) dir(root string) (string, error) {
	parts, err := k.parts()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{root}, parts...)...), nil
}

// escapePart maps an arbitrary string to a single safe path component,
// injectively: bytes in [A-Za-z0-9_-] and '.' are kept, except a '.' in first
// position; every other byte (including '%', '/', NUL and non-ASCII) becomes
// %XX with upper-case hex. The result never contains a separator, never is
// "." or "..", and never starts with '.', which keeps the store's own
// dot-directories out of every key's way.
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
