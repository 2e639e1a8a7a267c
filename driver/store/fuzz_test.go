package store

import (
	"encoding/json"
	"io/fs"
	"path"
	"strings"
	"testing"
)

// FuzzManifest: any manifest bytes are refused, or describe a tree whose
// every path and symlink stays inside the checkpoint directory; never a
// panic.
func FuzzManifest(f *testing.F) {
	good := `{"format":1,"key":"k","generation":1,"chunk_size":4096,"total_bytes":0,"files":[` +
		`{"path":"sub","mode":2147484141},{"path":"sub/l","mode":134218239,"link":"../x"}]}`
	f.Add([]byte(good))
	f.Add([]byte(strings.Replace(good, `"../x"`, `"../../x"`, 1)))
	f.Add([]byte(`{"format":1,"generation":1,"chunk_size":4096,"files":[{"path":"sub","mode":2147484141},` +
		`{"path":"sub/u","mode":134218239,"link":".."},{"path":"v","mode":134218239,"link":"sub/u/.."}]}`))
	f.Add([]byte(`{"format":1,"generation":1,"chunk_size":4096,"total_bytes":5,"files":[{"path":"a","mode":384,"size":5,"chunks":["00"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Manifest
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if m.check(1) != nil {
			return
		}
		links := map[string]string{}
		for _, e := range m.Files {
			if e.Path == "" || strings.HasPrefix(e.Path, "/") || strings.HasPrefix(e.Path, "../") || path.Clean(e.Path) != e.Path {
				t.Fatalf("accepted path %q", e.Path)
			}
			if e.Mode&fs.ModeSymlink != 0 {
				links[e.Path] = e.Link
			}
		}
		for p, target := range links {
			hops := 0
			dir := strings.Split(p, "/")
			if _, err := resolveLink(links, dir[:len(dir)-1], target, &hops); err != nil {
				t.Fatalf("accepted escaping link %q -> %q: %v", p, target, err)
			}
		}
	})
}
