package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// Local is the module being checked (caravan): a binary whose main module
// it is has its source here, not in the module cache.
type Local struct {
	Path string
	Dir  string
}

// LocalModule reads the path of the module in dir.
func LocalModule(dir string) (Local, error) {
	out, err := goCmd(dir, "list", "-m", "-f", "{{.Path}} {{.Dir}}")
	if err != nil {
		return Local{}, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return Local{}, fmt.Errorf("go list -m in %s: unexpected output %q", dir, out)
	}
	return Local{Path: f[0], Dir: f[1]}, nil
}

// BinaryModules lists the modules embedded in a Go binary's build
// information: its main module first, then every dependency (with its
// replacement), then the standard library. Each gets its Dir from the
// module cache (go mod download, which fetches what is missing), or from
// local for caravan's own binary.
func BinaryModules(bin string, local Local) ([]Module, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: reading its Go build information: %w", bin, err)
	}
	main := Module{Path: bi.Main.Path, Version: bi.Main.Version, Main: true}
	if main.Path == local.Path && local.Path != "" {
		main.Dir, main.Version = local.Dir, "" // as the build graph names it
	} else if main.Version == "" || main.Version == "(devel)" {
		// scripts/build-hashicorp.sh builds from a copy of the module, so
		// the binary says (devel); its file name, NAME-VERSION, says which.
		main.Version = versionFromName(bin)
		if main.Version == "" {
			return nil, fmt.Errorf("%s: its main module %s has no version, nor has its file name (NAME-vX.Y.Z)", bin, main.Path)
		}
	}
	mods := []Module{main}
	for _, d := range bi.Deps {
		mods = append(mods, depModule(d, local, main))
	}
	std, err := StdModule(bi.GoVersion)
	if err != nil {
		return nil, err
	}
	mods = append(mods, std)
	if err := download(mods); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	return mods, nil
}

func depModule(d *debug.Module, local Local, main Module) Module {
	m := Module{Path: d.Path, Version: d.Version}
	if r := d.Replace; r != nil {
		m.Replace = &Module{Path: r.Path, Version: r.Version}
		if r.Version == "" && main.Dir != "" && !filepath.IsAbs(r.Path) {
			// A directory replacement, relative to the local main module.
			m.Dir = filepath.Join(local.Dir, r.Path)
		} else if r.Version == "" {
			m.Dir = r.Path
		}
	}
	return m
}

// versionFromName takes the version from a file name NAME-vX.Y.Z...
func versionFromName(bin string) string {
	base := filepath.Base(bin)
	for i := 0; i+2 < len(base); i++ {
		if base[i] == '-' && base[i+1] == 'v' && base[i+2] >= '0' && base[i+2] <= '9' {
			return base[i+1:]
		}
	}
	return ""
}

// download fills in the Dir of every module without one from the module
// cache, in one go mod download call (offline when all are cached).
func download(mods []Module) error {
	var args []string
	want := map[string][]int{}
	for i, m := range mods {
		if m.Dir != "" || (m.Replace != nil && m.Replace.Version == "") {
			continue // a directory replacement has no version to fetch
		}
		path, version := m.Path, m.Version
		if m.Replace != nil {
			path, version = m.Replace.Path, m.Replace.Version
		}
		key := path + "@" + version
		if len(want[key]) == 0 {
			args = append(args, key)
		}
		want[key] = append(want[key], i)
	}
	if len(args) == 0 {
		return nil
	}
	// In an empty directory, outside any module, so that no go.mod has a say.
	empty, err := os.MkdirTemp("", "licences-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(empty)
	out, err := goCmd(empty, append([]string{"mod", "download", "-json"}, args...)...)
	if err != nil && len(out) == 0 {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var r struct{ Path, Version, Dir, Error string }
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("go mod download: decoding its output: %w", err)
		}
		for _, i := range want[r.Path+"@"+r.Version] {
			mods[i].Dir, mods[i].fetchErr = r.Dir, r.Error
		}
	}
	return nil
}
