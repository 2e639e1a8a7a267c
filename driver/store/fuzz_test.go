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
// every path and symlink stays inside the checkpoint directory and whose
// names (bytes, valid UTF-8 or not) survive encoding again exactly; never a
// panic.
func FuzzManifest(f *testing.F) {
	good := `{"format":1,"key":"k","generation":1,"chunk_size":4096,"total_bytes":0,"files":[` +
		`{"path":"sub","mode":2147484141},{"path":"sub/l","mode":134218239,"link":"../x"}]}`
	f.Add([]byte(good))
	f.Add([]byte(strings.Replace(good, `"../x"`, `"../../x"`, 1)))
	f.Add([]byte(`{"format":1,"generation":1,"chunk_size":4096,"files":[{"path":"sub","mode":2147484141},` +
		`{"path":"sub/u","mode":134218239,"link":".."},{"path":"v","mode":134218239,"link":"sub/u/.."}]}`))
	f.Add([]byte(`{"format":1,"generation":1,"chunk_size":4096,"total_bytes":5,"files":[{"path":"a","mode":384,"size":5,"chunks":["00"]}]}`))
	// Names as bytes: "a\xff" (Yf8=), a directory "d\x80" (ZIA=) holding a
	// link to "../a\xff" (Li4vYf8=), and both forms at once (refused).
	f.Add([]byte(`{"format":2,"generation":1,"chunk_size":4096,"files":[{"path_bytes":"Yf8=","mode":384,` +
		`"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},` +
		`{"path_bytes":"ZIA=","mode":2147484141},{"path_bytes":"ZIAvbA==","mode":134218239,"link_bytes":"Li4vYf8="}]}`))
	f.Add([]byte(`{"format":2,"generation":1,"chunk_size":4096,"files":[{"path":"a","path_bytes":"YQ==","mode":2147484141}]}`))
	f.Add([]byte(`{"format":2,"generation":1,"chunk_size":4096,"files":[{"path_bytes":"Li4=","mode":2147484141},` +
		`{"path_bytes":"YQBi","mode":2147484141},{"path":"l","mode":134218239,"link_bytes":"Li4vLi4v/w=="}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Manifest
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if m.Check(1) != nil {
			return
		}
		enc, err := json.Marshal(&m)
		if err != nil {
			t.Fatalf("accepted manifest does not encode: %v", err)
		}
		if err := CheckEncoded(enc, &m); err != nil {
			t.Fatalf("accepted manifest does not survive encoding: %v", err)
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
