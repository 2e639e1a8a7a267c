package store

import (
	"fmt"
	"io/fs"
	"strings"
)

// maxLinkHops bounds symlink resolution, like the kernel's ELOOP limit.
const maxLinkHops = 40

// checkLinksResolve resolves every symlink in files against the checkpoint
// root, following the symlinks of the tree itself as the kernel would, and
// refuses any that ends outside the root or loops. checkLink's lexical test
// alone passes chains such as "sub/u -> .." plus "v -> sub/u/..", which
// together point above the root.
func checkLinksResolve(files []FileEntry) error {
	links := make(map[string]string)
	for _, f := range files {
		if f.Mode&fs.ModeSymlink != 0 {
			links[f.Path] = f.Link
		}
	}
	for _, f := range files {
		if f.Mode&fs.ModeSymlink == 0 {
			continue
		}
		hops := 0
		parent := strings.Split(f.Path, "/")
		parent = parent[:len(parent)-1]
		if _, err := resolveLink(links, parent, f.Link, &hops); err != nil {
			return fmt.Errorf("%w: symlink %q -> %q: %w", ErrInvalid, f.Path, f.Link, err)
		}
	}
	return nil
}

// resolveLink resolves target from the directory dir (components below the
// root) through links, returning the components it ends at.
func resolveLink(links map[string]string, dir []string, target string, hops *int) ([]string, error) {
	if strings.HasPrefix(target, "/") {
		return nil, fmt.Errorf("absolute target")
	}
	cur := append([]string(nil), dir...)
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, fmt.Errorf("escapes the checkpoint directory")
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := append(cur, c)
		t, ok := links[strings.Join(next, "/")]
		if !ok {
			cur = next
			continue
		}
		if *hops++; *hops > maxLinkHops {
			return nil, fmt.Errorf("more than %d links deep (a loop?)", maxLinkHops)
		}
		r, err := resolveLink(links, cur, t, hops)
		if err != nil {
			return nil, err
		}
		cur = r
	}
	return cur, nil
}
