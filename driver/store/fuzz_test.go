package store

import (
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
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
		// Build the tree on disk and let the kernel resolve every link: none
		// may end outside the root.
		root, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Files {
			if e.Path == "" || strings.HasPrefix(e.Path, "/") || strings.HasPrefix(e.Path, "../") || path.Clean(e.Path) != e.Path {
				t.Fatalf("accepted path %q", e.Path)
			}
			p := filepath.Join(root, filepath.FromSlash(e.Path))
			switch {
			case e.Mode.IsDir():
				err = os.Mkdir(p, 0o755)
			case e.Mode&fs.ModeSymlink != 0:
				err = os.Symlink(filepath.FromSlash(e.Link), p)
			default:
				err = os.WriteFile(p, nil, 0o644)
			}
			if err != nil {
				t.Fatalf("materialise %q: %v", e.Path, err)
			}
		}
		for _, e := range m.Files {
			if e.Mode&fs.ModeSymlink == 0 {
				continue
			}
			r, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(e.Path)))
			if err != nil {
				continue // dangling or a loop the kernel refuses: harmless
			}
			if r != root && !strings.HasPrefix(r, root+string(filepath.Separator)) {
				t.Fatalf("accepted link %q -> %q resolves outside the root to %s", e.Path, e.Link, r)
			}
		}
	})
}
