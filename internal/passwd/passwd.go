// Package passwd resolves a task's user to a numeric uid and gid from the
// passwd and group files under a root directory: "/" for a process on the
// host, an image's root file system for a container. It never asks the host's
// name service (NSS) about a container's user, and reads only the two files.
package passwd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrUnknownUser means the name is not in the passwd file.
var ErrUnknownUser = errors.New("no such user")

// ErrUnknownGroup means the group name is not in the group file.
var ErrUnknownGroup = errors.New("no such group")

// IDs is a resolved user: its uid and primary (or named) gid.
type IDs struct {
	UID, GID int
}

// Files gives a root file system's etc/passwd and etc/group: Open is
// called with "etc/passwd" or "etc/group" and fails with an error that
// wraps fs.ErrNotExist when there is no such file.
type Files interface {
	Open(name string) (io.ReadCloser, error)
	// Where names the file for errors, e.g. "/srv/root/etc/passwd" or
	// "image app:1 /etc/passwd".
	Where(name string) string
}

// dirFiles is Files under a directory.
type dirFiles string

func (d dirFiles) Open(name string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(string(d), name))
}
func (d dirFiles) Where(name string) string { return filepath.Join(string(d), name) }

// MapFiles is Files held in memory, e.g. read out of a container image:
// the file name ("etc/passwd", "etc/group") to its content. Label names
// where they came from in errors.
type MapFiles struct {
	Label string
	Files map[string][]byte
}

// Open returns the named file, or an error wrapping fs.ErrNotExist.
func (m MapFiles) Open(name string) (io.ReadCloser, error) {
	b, ok := m.Files[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: m.Where(name), Err: fs.ErrNotExist}
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// Where is "<label> /<name>".
func (m MapFiles) Where(name string) string { return m.Label + " /" + name }

// Lookup resolves spec, in the forms Nomad and container engines accept:
// "name", "uid", "name:group", "uid:gid" (any mix of names and numbers).
// A numeric user is used as it is, with its passwd entry's group when it
// has one and gid 0 otherwise (as docker and runc do); names are read from
// root's etc/passwd and etc/group.
func Lookup(root, spec string) (IDs, error) { return LookupIn(dirFiles(root), spec) }

// LookupIn is Lookup in the passwd and group files files gives.
func LookupIn(files Files, spec string) (IDs, error) {
	if strings.TrimSpace(spec) == "" {
		return IDs{}, errors.New("empty user")
	}
	user, group, hasGroup := strings.Cut(spec, ":")
	ids, err := lookupUser(files, user)
	if err != nil {
		return IDs{}, err
	}
	if hasGroup {
		gid, err := lookupGroup(files, group)
		if err != nil {
			return IDs{}, err
		}
		ids.GID = gid
	}
	return ids, nil
}

// NeedsFiles says whether spec needs the passwd or group file: only
// "uid:gid", both numeric, does not.
func NeedsFiles(spec string) bool {
	user, group, hasGroup := strings.Cut(spec, ":")
	_, u := parseID(user)
	_, g := parseID(group)
	return !(hasGroup && u && g)
}

func lookupUser(files Files, user string) (IDs, error) {
	uid, numeric := parseID(user)
	var found *IDs
	err := scan(files, "etc/passwd", func(f []string) bool {
		if len(f) < 4 {
			return false
		}
		if (numeric && f[2] == strconv.Itoa(uid)) || (!numeric && f[0] == user) {
			u, okU := parseID(f[2])
			g, okG := parseID(f[3])
			if okU && okG {
				found = &IDs{UID: u, GID: g}
				return true
			}
		}
		return false
	})
	switch {
	case found != nil:
		return *found, nil
	case numeric && (err == nil || errors.Is(err, fs.ErrNotExist)):
		// A numeric user needs no passwd entry.
		return IDs{UID: uid, GID: 0}, nil
	case err != nil:
		return IDs{}, fmt.Errorf("user %q: %w", user, err)
	default:
		return IDs{}, fmt.Errorf("user %q: %w in %s", user, ErrUnknownUser, files.Where("etc/passwd"))
	}
}

func lookupGroup(files Files, group string) (int, error) {
	if gid, ok := parseID(group); ok {
		return gid, nil
	}
	gid := -1
	err := scan(files, "etc/group", func(f []string) bool {
		if len(f) >= 3 && f[0] == group {
			if g, ok := parseID(f[2]); ok {
				gid = g
				return true
			}
		}
		return false
	})
	if gid >= 0 {
		return gid, nil
	}
	if err != nil {
		return 0, fmt.Errorf("group %q: %w", group, err)
	}
	return 0, fmt.Errorf("group %q: %w in %s", group, ErrUnknownGroup, files.Where("etc/group"))
}

// parseID reads a non-negative decimal id below 2^31.
func parseID(s string) (int, bool) {
	n, err := strconv.ParseUint(s, 10, 31)
	return int(n), err == nil
}

// scan calls match with each line's colon-separated fields until it says
// stop. A file larger than 4 MiB is read only that far.
func scan(files Files, name string, match func([]string) bool) error {
	f, err := files.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	s := bufio.NewScanner(io.LimitReader(f, 4<<20))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if match(strings.Split(line, ":")) {
			return nil
		}
	}
	return s.Err()
}

// LookupHost resolves spec for a process on this host through the host's
// name service (os/user: NSS with cgo, /etc/passwd without), in the same
// forms as Lookup.
func LookupHost(spec string) (IDs, error) {
	if strings.TrimSpace(spec) == "" {
		return IDs{}, errors.New("empty user")
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	var u *user.User
	var err error
	if _, numeric := parseID(name); numeric {
		u, err = user.LookupId(name)
		if err != nil {
			// A numeric user needs no entry, as in Lookup.
			u = &user.User{Uid: name, Gid: "0"}
		}
	} else if u, err = user.Lookup(name); err != nil {
		return IDs{}, fmt.Errorf("user %q: %w: %w", name, ErrUnknownUser, err)
	}
	uid, okU := parseID(u.Uid)
	gid, okG := parseID(u.Gid)
	if !okU || !okG {
		return IDs{}, fmt.Errorf("user %q: non-numeric ids %q:%q", name, u.Uid, u.Gid)
	}
	if hasGroup {
		if g, ok := parseID(group); ok {
			gid = g
		} else {
			grp, err := user.LookupGroup(group)
			if err != nil {
				return IDs{}, fmt.Errorf("group %q: %w: %w", group, ErrUnknownGroup, err)
			}
			if gid, ok = parseID(grp.Gid); !ok {
				return IDs{}, fmt.Errorf("group %q: non-numeric gid %q", group, grp.Gid)
			}
		}
	}
	return IDs{UID: uid, GID: gid}, nil
}
