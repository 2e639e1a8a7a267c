package driver

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// idRange is one inclusive range of host user or group IDs.
type idRange struct{ lo, hi uint32 }

// idRanges is a parsed denied_host_uids or denied_host_gids value.
type idRanges []idRange

// parseIDRanges parses raw_exec's format: comma-separated IDs and
// inclusive ranges, such as "0,10-20". Empty denies nothing.
func parseIDRanges(field, s string) (idRanges, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out idRanges
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		loS, hiS, isRange := strings.Cut(part, "-")
		lo, err := strconv.ParseUint(loS, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an ID or a range such as 10-20", field, part)
		}
		hi := lo
		if isRange {
			if hi, err = strconv.ParseUint(hiS, 10, 32); err != nil {
				return nil, fmt.Errorf("%s: %q is not an ID or a range such as 10-20", field, part)
			}
			if lo > hi {
				return nil, fmt.Errorf("%s: range %q has its lower bound above its upper bound", field, part)
			}
		}
		out = append(out, idRange{uint32(lo), uint32(hi)})
	}
	return out, nil
}

func (r idRanges) contains(id uint32) bool {
	for _, x := range r {
		if id >= x.lo && id <= x.hi {
			return true
		}
	}
	return false
}

// errDeniedHostID marks a task refused for its user's host UID or GID.
var errDeniedHostID = errors.New("denied host ID")

// checkHostIDs refuses to run a task as a user whose UID, or any of whose
// groups (primary and supplementary), the plugin config denies. The user is
// the task's `user`, else the user the client agent runs as, as with
// raw_exec.
func (c *Config) checkHostIDs(userName string) error {
	if len(c.deniedUIDs) == 0 && len(c.deniedGIDs) == 0 {
		return nil
	}
	u, err := lookupTaskUser(userName)
	if err != nil {
		return err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return fmt.Errorf("user %q: UID %q is not numeric", u.Username, u.Uid)
	}
	if c.deniedUIDs.contains(uint32(uid)) {
		return fmt.Errorf("%w: user %q has UID %d, which denied_host_uids (%q) forbids on this client",
			errDeniedHostID, u.Username, uid, c.DeniedHostUids)
	}
	gids, err := u.GroupIds()
	if err != nil {
		return fmt.Errorf("user %q: look up groups: %w", u.Username, err)
	}
	for _, g := range append([]string{u.Gid}, gids...) {
		gid, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return fmt.Errorf("user %q: GID %q is not numeric", u.Username, g)
		}
		if c.deniedGIDs.contains(uint32(gid)) {
			return fmt.Errorf("%w: user %q is in group %d, which denied_host_gids (%q) forbids on this client",
				errDeniedHostID, u.Username, gid, c.DeniedHostGids)
		}
	}
	return nil
}

// lookupTaskUser finds the task's user, or the plugin's own (the agent's)
// when the task names none.
func lookupTaskUser(name string) (*user.User, error) {
	if name == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("look up the client agent's user: %w", err)
		}
		return u, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up task user %q: %w", name, err)
	}
	return u, nil
}
