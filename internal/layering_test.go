// Package internal_test holds the rule that keeps internal/ at the bottom
// of caravan's imports: its packages are helpers the parts share, so none
// of them imports a caravan package outside internal/ (the parts device/,
// driver/ and planner/, or a command such as validate/).
package internal_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/caravan-nomad/caravan/"

// TestInternalImportsNothingAboveIt reads the imports of every Go file
// under internal/, tests included, and fails on any caravan import outside
// internal/.
func TestInternalImportsNothingAboveIt(t *testing.T) {
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"internal/") {
				t.Errorf("internal/%s imports %s: internal/ imports only internal/", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("read %d Go files under internal/; expected the helpers' files", files)
	}
}
