package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// Module is one module of a build graph: where its source is (Dir) and, for
// a replaced one, what replaced it.
type Module struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *Module

	fetchErr string // go mod download's error
}

// String names the module as a failure does: path@version, and what
// replaced it.
func (m Module) String() string {
	s := m.Path
	if m.Version != "" {
		s += "@" + m.Version
	}
	if r := m.Replace; r != nil {
		s += " => " + r.Path
		if r.Version != "" {
			s += "@" + r.Version
		}
	}
	return s
}

// goCmd runs the go command in dir and returns its standard output; a
// failure carries its standard error.
func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s (in %s): %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// GraphModules lists every module in the build graph of every package of
// the module in dir, tests included (go list -deps -test ./...), with the
// main module first and the rest sorted by path. A replaced module's Dir
// is its replacement's.
func GraphModules(dir string) ([]Module, error) {
	out, err := goCmd(dir, "list", "-deps", "-test", "-json=Module", "./...")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var mods []Module
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ Module *Module }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: decoding its output: %w", err)
		}
		if p.Module == nil || seen[p.Module.String()] { // the standard library
			continue
		}
		seen[p.Module.String()] = true
		m := *p.Module
		if m.Replace != nil && m.Replace.Dir != "" {
			m.Dir = m.Replace.Dir
		}
		mods = append(mods, m)
	}
	sortModules(mods)
	return mods, nil
}

func sortModules(mods []Module) {
	sort.SliceStable(mods, func(i, j int) bool {
		if mods[i].Main != mods[j].Main {
			return mods[i].Main
		}
		return mods[i].String() < mods[j].String()
	})
}

// StdModule is the Go standard library, judged by GOROOT's LICENSE: it is
// linked into every binary though it is no module.
func StdModule(goVersion string) (Module, error) {
	out, err := goCmd(".", "env", "GOROOT", "GOVERSION")
	if err != nil {
		return Module{}, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return Module{}, fmt.Errorf("go env GOROOT GOVERSION: unexpected output %q", out)
	}
	if goVersion == "" {
		goVersion = f[1]
	}
	return Module{Path: "std", Version: goVersion, Dir: f[0]}, nil
}
