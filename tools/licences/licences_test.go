package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// fixtureProxy serves testdata/modules (each NAME@VERSION, the module
// example.com/NAME) as a file GOPROXY in a fresh module cache, so that the
// tests run offline and download nothing real (no BUSL Nomad).
func fixtureProxy(t *testing.T) {
	t.Helper()
	proxy := t.TempDir()
	dirs, err := filepath.Glob("testdata/modules/*@*")
	must.NoError(t, err)
	must.SliceNotEmpty(t, dirs)
	for _, dir := range dirs {
		name, version, _ := strings.Cut(filepath.Base(dir), "@")
		at := filepath.Join(proxy, "example.com", name, "@v")
		must.NoError(t, os.MkdirAll(at, 0o755))
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		must.NoError(t, err)
		must.NoError(t, os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644))
		info := fmt.Sprintf(`{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, version)
		must.NoError(t, os.WriteFile(filepath.Join(at, version+".info"), []byte(info), 0o644))
		must.NoError(t, os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644))
		must.NoError(t, os.WriteFile(filepath.Join(at, version+".zip"), moduleZip(t, dir, "example.com/"+name+"@"+version), 0o644))
	}
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(proxy))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "-mod=mod -modcacherw")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOTOOLCHAIN", "local")
}

// moduleZip zips a module directory as the proxy protocol wants it: every
// file under PATH@VERSION/.
func moduleZip(t *testing.T, dir, prefix string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	entries, err := os.ReadDir(dir)
	must.NoError(t, err)
	for _, e := range entries {
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		must.NoError(t, err)
		w, err := zw.Create(prefix + "/" + e.Name())
		must.NoError(t, err)
		_, err = w.Write(body)
		must.NoError(t, err)
	}
	must.NoError(t, zw.Close())
	return b.Bytes()
}

// app writes a main module example.com/app (MIT) whose main package
// imports the fixture modules deps, and returns its directory.
func app(t *testing.T, deps ...string) string {
	t.Helper()
	dir := t.TempDir()
	var gomod, imports, calls strings.Builder
	gomod.WriteString("module example.com/app\n\ngo 1.22\n")
	for _, d := range deps {
		fmt.Fprintf(&gomod, "\nrequire example.com/%s v1.0.0\n", d)
		fmt.Fprintf(&imports, "import %q\n", "example.com/"+d)
		fmt.Fprintf(&calls, "\tprintln(%s.Name())\n", d)
	}
	main := "package main\n\n" + imports.String() + "\nfunc main() {\n" + calls.String() + "}\n"
	must.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod.String()), 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644))
	lic, err := os.ReadFile("testdata/modules/mitlib@v1.0.0/LICENSE")
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(filepath.Join(dir, "LICENSE"), lic, 0o644))
	return dir
}

// build builds the main package in dir into out.
func build(t *testing.T, dir, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(b)))
}

// licences runs the command as make licences does; it returns its exit
// code and what it printed.
func licences(args ...string) (int, string) {
	var out bytes.Buffer
	code := run(args, &out, &out)
	return code, out.String()
}

func TestClassifier_Fixtures(t *testing.T) {
	c, err := NewClassifier()
	must.NoError(t, err)
	cases := []struct {
		file string
		want []string
	}{
		{"testdata/modules/busl@v1.0.0/LICENSE", []string{"BUSL-1.1"}},
		{"testdata/modules/mitlib@v1.0.0/LICENSE", []string{"MIT"}},
		{"testdata/modules/mitlib@v1.0.0/mitlib.go", []string{}},
		{"../../LICENSE", []string{"MPL-2.0"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(tc.file)
			must.NoError(t, err)
			must.Eq(t, tc.want, c.Identify(b))
		})
	}
}

func TestModules(t *testing.T) {
	fixtureProxy(t)
	cases := []struct {
		name string
		deps []string
		code int
		want string
	}{
		{"mit passes", []string{"mitlib"}, 0, "example.com/mitlib@v1.0.0"},
		{"busl fails", []string{"mitlib", "busl"}, 1,
			"NOT ALLOWED: example.com/busl@v1.0.0: BUSL-1.1 (LICENSE: BUSL-1.1 is not allowed)"},
		{"no licence fails", []string{"nolicence"}, 1,
			"NOT ALLOWED: example.com/nolicence@v1.0.0: unclassified (unclassified: no LICENSE, COPYING or NOTICE file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := licences("modules", "-v", app(t, tc.deps...))
			must.Eq(t, tc.code, code, must.Sprint(out))
			must.StrContains(t, out, tc.want)
			must.StrContains(t, out, "example.com/app")
			must.StrContains(t, out, "std@go")
			if tc.code == 0 {
				must.StrNotContains(t, out, "NOT ALLOWED")
			}
		})
	}
}

func TestModules_Replaced(t *testing.T) {
	fixtureProxy(t)
	dir := app(t, "busl")
	abs, err := filepath.Abs("testdata/modules/busl@v1.0.0")
	must.NoError(t, err)
	f, err := os.OpenFile(filepath.Join(dir, "go.mod"), os.O_APPEND|os.O_WRONLY, 0)
	must.NoError(t, err)
	_, err = fmt.Fprintf(f, "\nreplace example.com/busl => %s\n", abs)
	must.NoError(t, err)
	must.NoError(t, f.Close())
	code, out := licences("modules", dir)
	must.Eq(t, 1, code, must.Sprint(out))
	must.StrContains(t, out, "example.com/busl@v1.0.0 => "+abs+": BUSL-1.1")
}

func TestBinaries(t *testing.T) {
	fixtureProxy(t)
	bins := t.TempDir()
	// mitcmd built as scripts/build-hashicorp.sh builds an agent: from a
	// copy of its module, so that its version comes from the file name.
	src := t.TempDir()
	must.NoError(t, os.CopyFS(src, os.DirFS("testdata/modules/mitcmd@v1.0.0")))
	mitcmd := filepath.Join(bins, "mitcmd-v1.0.0")
	build(t, src, mitcmd)
	// A binary of the local module (caravan's case) that links BUSL.
	local := app(t, "mitlib", "busl")
	buslApp := filepath.Join(bins, "app")
	build(t, local, buslApp)
	missing := filepath.Join(bins, "nomad-v1.6.1")

	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"mit passes", []string{"-v", mitcmd}, 0,
			[]string{"example.com/mitcmd@v1.0.0", "example.com/mitlib@v1.0.0", "MIT (in " + mitcmd + ")", "std@go"}},
		{"busl fails", []string{buslApp}, 1,
			[]string{"NOT ALLOWED (in " + buslApp + "): example.com/busl@v1.0.0: BUSL-1.1"}},
		{"not built is skipped", []string{missing, mitcmd}, 0, nil},
		{"not built fails when required", []string{"-require-binaries", missing}, 1,
			[]string{"NOT ALLOWED: " + missing + ": not built"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := licences(append([]string{"binaries", "-module", local}, tc.args...)...)
			must.Eq(t, tc.code, code, must.Sprint(out))
			for _, w := range tc.want {
				must.StrContains(t, out, w)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	fixtureProxy(t)
	code, out := licences("headers", "testdata/apps/header")
	must.Eq(t, 1, code, must.Sprint(out))
	must.StrContains(t, out, "testdata/apps/header/vendored.go is compiled into the binary and SPDX-License-Identifier: BUSL-1.1")
	must.StrNotContains(t, out, "clean.go")
	must.StrNotContains(t, out, "main.go")

	dir := app(t, "mitlib")
	text := "// Portions under the Business Source License 1.1.\n\npackage main\n"
	must.NoError(t, os.WriteFile(filepath.Join(dir, "portions.go"), []byte(text), 0o644))
	code, out = licences("headers", dir)
	must.Eq(t, 1, code, must.Sprint(out))
	must.StrContains(t, out, "portions.go is compiled into the binary and mentions the Business Source License")
}

func TestCheck_Summary(t *testing.T) {
	fixtureProxy(t)
	dir := app(t, "mitlib")
	bin := filepath.Join(t.TempDir(), "app")
	build(t, dir, bin)
	code, out := licences("check", "-module", dir, bin, filepath.Join(dir, "build", "caravan"))
	must.Eq(t, 0, code, must.Sprint(out))
	must.StrContains(t, out, "licences: 3 modules, 1 binaries (1 not built, skipped: "+dir+"/build/caravan), 2 files compiled into the main package: all allowed")
}

func TestReport(t *testing.T) {
	fixtureProxy(t)
	dir := app(t, "mitlib")
	bin := filepath.Join(t.TempDir(), "app")
	build(t, dir, bin)
	file := filepath.Join(t.TempDir(), "THIRD_PARTY_LICENSES")
	code, out := licences("report", "-module", dir, "-o", file, bin)
	must.Eq(t, 0, code, must.Sprint(out))
	b, err := os.ReadFile(file)
	must.NoError(t, err)
	report := string(b)
	must.StrHasPrefix(t, reportTitle+" of ", report)
	must.StrContains(t, report, "example.com/mitlib")
	must.StrContains(t, report, "example.com/mitlib v1.0.0: LICENSE (MIT)")
	must.StrContains(t, report, "Permission is hereby granted")
	must.StrContains(t, report, "std ")
	must.StrNotContains(t, report, "example.com/app ") // its own LICENSE ships beside

	busl := app(t, "busl")
	build(t, busl, bin)
	code, out = licences("report", "-module", busl, "-o", file+".busl", bin)
	must.Eq(t, 1, code, must.Sprint(out))
	must.StrContains(t, out, "example.com/busl@v1.0.0: BUSL-1.1")
	must.FileNotExists(t, file+".busl")
}

func TestJudge_Files(t *testing.T) {
	c, err := NewClassifier()
	must.NoError(t, err)
	mit, err := os.ReadFile("testdata/modules/mitlib@v1.0.0/LICENSE")
	must.NoError(t, err)
	busl, err := os.ReadFile("testdata/modules/busl@v1.0.0/LICENSE")
	must.NoError(t, err)
	cases := []struct {
		name  string
		files map[string][]byte
		want  []string
	}{
		{"one allowed", map[string][]byte{"LICENSE": mit}, nil},
		{"with a NOTICE of attributions", map[string][]byte{"LICENSE.md": mit, "NOTICE": []byte("Includes work by Example.\n")}, nil},
		{"several files: all must be allowed", map[string][]byte{"LICENSE": mit, "COPYING": busl},
			[]string{"COPYING: BUSL-1.1 is not allowed"}},
		{"a docs licence alone is no licence", map[string][]byte{"LICENSE.docs": mit},
			[]string{"unclassified: no licence found in LICENSE.docs"}},
		{"a NOTICE alone is no licence", map[string][]byte{"NOTICE": []byte("Includes work by Example.\n")},
			[]string{"unclassified: no licence found in NOTICE"}},
		{"an unknown text", map[string][]byte{"LICENSE": []byte("All rights reserved.\n")},
			[]string{"LICENSE: unclassified"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				must.NoError(t, os.WriteFile(filepath.Join(dir, name), body, 0o644))
			}
			v := c.Judge(Module{Path: "example.com/m", Version: "v1.0.0", Dir: dir})
			must.Eq(t, tc.want, v.Problems)
		})
	}
}

func TestFileProblems(t *testing.T) {
	cases := []struct {
		name string
		file File
		want []string
	}{
		{"allowed", File{Name: "LICENSE", Licences: []string{"MIT"}}, nil},
		{"all must be allowed", File{Name: "LICENSE", Licences: []string{"MIT", "GPL-2.0"}},
			[]string{"LICENSE: GPL-2.0 is not allowed"}},
		{"unclassified", File{Name: "COPYING"}, []string{"COPYING: unclassified"}},
		{"a notice may name none", File{Name: "NOTICE"}, nil},
		{"docs only", File{Name: "LICENSE.docs", Licences: []string{"CC-BY-SA-4.0"}, Docs: true}, nil},
		{"a declared choice", File{Name: "License", Licences: []string{"BSD-3-Clause", "GPL-2.0"},
			SPDX: "BSD-3-Clause OR GPL-2.0-only"}, nil},
		{"a declared choice of nothing allowed", File{Name: "License", Licences: []string{"GPL-2.0", "GPL-3.0"},
			SPDX: "GPL-2.0-only OR GPL-3.0-only"}, []string{"License: GPL-2.0 is not allowed", "License: GPL-3.0 is not allowed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, fileProblems(tc.file))
		})
	}
}

func TestJudge_Reviewed(t *testing.T) {
	c, err := NewClassifier()
	must.NoError(t, err)
	dir := "testdata/modules/nolicence@v1.0.0"
	v := c.Judge(Module{Path: "github.com/tj/go-spin", Version: "v1.1.0", Dir: dir})
	must.SliceEmpty(t, v.Problems)
	must.StrHasPrefix(t, "MIT (reviewed: no LICENSE file", v.Licences())

	// Another version is judged by its files again.
	v = c.Judge(Module{Path: "github.com/tj/go-spin", Version: "v1.2.0", Dir: dir})
	must.Eq(t, []string{"unclassified: no LICENSE, COPYING or NOTICE file in " + dir}, v.Problems)
}

func TestSPDXAllowed(t *testing.T) {
	cases := []struct {
		expr string
		want bool
	}{
		{"MPL-2.0", true},
		{"BUSL-1.1", false},
		{"MIT OR Apache-2.0", true},
		{"BSD-3-Clause OR GPL-2.0-only", true},
		{"MIT AND BUSL-1.1", false},
		{"(MIT AND BSD-3-Clause) OR BUSL-1.1", true},
		{"Apache-2.0 WITH LLVM-exception", true},
		{"", false},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			must.Eq(t, tc.want, spdxAllowed(tc.expr))
		})
	}
}

func TestSPDXExpr_FileHeadOnly(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"declared on top", "/* SPDX-License-Identifier: BSD-3-Clause OR GPL-2.0-only */\n\ntext\n", "BSD-3-Clause OR GPL-2.0-only"},
		{"a quoted component's, further down", "Apache\n\n\n\n\n\nSPDX-License-Identifier: BSD-2-Clause\n", ""},
		{"none", "MIT License\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, spdxExpr([]byte(tc.text)))
		})
	}
}

func TestVersionFromName(t *testing.T) {
	cases := map[string]string{
		"build/bin/nomad-v1.6.1":                                 "v1.6.1",
		"build/bin/nomad-driver-podman-v0.6.5":                   "v0.6.5",
		"build/bin/seaweedfs-v0.0.0-20261109003541-7506e5f91cd6": "v0.0.0-20261109003541-7506e5f91cd6",
		"build/caravan":                                          "",
	}
	for in, want := range cases {
		must.Eq(t, want, versionFromName(in), must.Sprint(in))
	}
}

// TestREADME_Allowlist: the README says why each allowed licence is
// allowed, so it names every one.
func TestREADME_Allowlist(t *testing.T) {
	b, err := os.ReadFile("README.md")
	must.NoError(t, err)
	for l := range allowed {
		must.StrContains(t, string(b), "`"+l+"`")
	}
}
