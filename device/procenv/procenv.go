// Package procenv reads processes' environment variables from procfs, which
// is how caravan attributes a GPU process to the reservation that started it.
package procenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// DefaultRoot is the host's procfs mount.
const DefaultRoot = "/proc"

// Lookup returns the values of keys in process pid's initial environment
// (root/<pid>/environ). Missing keys are absent from the map.
func Lookup(root string, pid int, keys ...string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "environ"))
	if err != nil {
		return nil, fmt.Errorf("procenv: pid %d: %w", pid, err)
	}
	out := make(map[string]string, len(keys))
	for len(b) > 0 {
		var entry []byte
		if i := bytes.IndexByte(b, 0); i >= 0 {
			entry, b = b[:i], b[i+1:]
		} else {
			entry, b = b, nil
		}
		eq := bytes.IndexByte(entry, '=')
		if eq <= 0 {
			continue
		}
		name := entry[:eq]
		for _, k := range keys {
			if string(name) == k {
				out[k] = string(entry[eq+1:])
				break
			}
		}
	}
	return out, nil
}

// PIDs lists the numeric entries of root, that is every visible process.
func PIDs(root string) ([]int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("procenv: %w", err)
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
