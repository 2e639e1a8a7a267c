package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// fakeGo is a `go` that answers what scripts/check-go.sh and
// scripts/build-hashicorp.sh ask, as a real one would on a cold cache:
// FAKE_GO_VERSION is its version, FAKE_AGENT_GO the go line of the agent's
// go.mod, FAKE_BUILD_FAIL makes the compile fail.
const fakeGo = `#!/usr/bin/env bash
case "$1 $2" in
  "env GOVERSION") echo "$FAKE_GO_VERSION" ;;
  "env GOTOOLCHAIN") echo local ;;
  "mod download")
    mkdir -p "$FAKE_SRC" && printf 'module m\n\ngo %s\n' "$FAKE_AGENT_GO" >"$FAKE_SRC/go.mod"
    printf '{\n\t"Path": "m",\n\t"Dir": "%s",\n}\n' "$FAKE_SRC" ;;
  "mod edit") ;;
  list*) for i in $(seq 300); do echo "go: downloading example.com/m$i v1.0.0" >&2; done ;;
  build*)
    echo "go: downloading example.com/late v1.0.0" >&2
    if [[ -n ${FAKE_BUILD_FAIL:-} ]]; then echo "agent/main.go:3:2: undefined: frobnicate" >&2; exit 1; fi
    while [[ $1 != -o ]]; do shift; done; echo "built" >"$2" && chmod +x "$2" ;;
  *) echo "fake go: unexpected: $*" >&2; exit 2 ;;
esac
`

// scriptRoot lays out a scratch repository with the build scripts, a
// go.mod needing Go 1.25.8 and the fake go first on PATH.
func scriptRoot(t *testing.T, goVersion string) (root string, env []string) {
	t.Helper()
	root = t.TempDir()
	must.NoError(t, os.MkdirAll(filepath.Join(root, "scripts"), 0o755))
	for _, s := range []string{"check-go.sh", "build-hashicorp.sh"} {
		b, err := os.ReadFile(filepath.Join("scripts", s))
		must.NoError(t, err)
		must.NoError(t, os.WriteFile(filepath.Join(root, "scripts", s), b, 0o755))
	}
	must.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n\ngo 1.25.8\n"), 0o644))
	bin := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755))
	env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin", "FAKE_GO_VERSION="+goVersion,
		"FAKE_SRC="+filepath.Join(t.TempDir(), "src"), "FAKE_AGENT_GO=1.25.8")
	return root, env
}

func runScript(t *testing.T, root string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "scripts", args[0]), args[1:]...)
	cmd.Env = env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func TestCheckGo(t *testing.T) {
	cases := []struct {
		name, version string
		args          []string
		ok            bool
		want          string
	}{
		{"newer", "go1.26.8", nil, true, "go1.26.8 (needs 1.25.8 or newer for caravan (go.mod))"},
		{"same", "go1.25.8", nil, true, "needs 1.25.8"},
		{"older patch", "go1.25.7", nil, false, "caravan (go.mod) needs Go 1.25.8 or newer; `go` on PATH"},
		{"older minor", "go1.24.11", nil, false, "is go1.24.11"},
		{"release candidate", "go1.26rc1", nil, true, "go1.26rc1"},
		{"an agent's own", "go1.25.6", []string{"1.25.5", "consul v1.14.11"}, true, "for consul v1.14.11"},
		{"toolchain hint", "go1.24.0", nil, false, "GOTOOLCHAIN=auto"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, env := scriptRoot(t, tc.version)
			out, errOut, err := runScript(t, root, env, append([]string{"check-go.sh"}, tc.args...)...)
			if tc.ok {
				must.NoError(t, err, must.Sprint(errOut))
				must.StrContains(t, out, tc.want)
				return
			}
			must.Error(t, err)
			must.StrContains(t, errOut, tc.want)
		})
	}
	t.Run("no go", func(t *testing.T) {
		root, env := scriptRoot(t, "go1.26.8")
		for _, p := range []string{"/usr/bin/go", "/bin/go"} {
			if _, err := os.Stat(p); err == nil {
				t.Skip("a go in /usr/bin or /bin")
			}
		}
		env = append(env, "PATH=/usr/bin:/bin")
		cmd := exec.Command("/bin/bash", filepath.Join(root, "scripts", "check-go.sh"))
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		must.Error(t, err)
		must.StrContains(t, string(b), "no `go` on PATH")
	})
}

// TestBuildHashicorp_Stages: the agent build prints a line per stage and
// keeps the module downloads' noise in its log.
func TestBuildHashicorp_Stages(t *testing.T) {
	root, env := scriptRoot(t, "go1.26.8")
	out, errOut, err := runScript(t, root, env, "build-hashicorp.sh", "nomad", "v1.6.1")
	must.NoError(t, err, must.Sprint(errOut))
	for _, s := range []string{"[1/4] fetching the nomad source", "needs 1.25.8 or newer for nomad v1.6.1 (its go.mod)",
		"[2/4] fetching its dependencies", "[3/4] compiling", "[4/4] built build/bin/nomad-v1.6.1"} {
		must.StrContains(t, out, s)
	}
	must.StrNotContains(t, out+errOut, "go: downloading")
	log, err := os.ReadFile(filepath.Join(root, "build", "logs", "build-nomad-v1.6.1.log"))
	must.NoError(t, err)
	must.Eq(t, 301, strings.Count(string(log), "go: downloading"))
	must.FileExists(t, filepath.Join(root, "build", "bin", "nomad-v1.6.1"))

	out, _, err = runScript(t, root, env, "build-hashicorp.sh", "nomad", "v1.6.1")
	must.NoError(t, err)
	must.StrContains(t, out, "cached at build/bin/nomad-v1.6.1")
}

// TestBuildHashicorp_RefusesNonOpenSource: no Nomad from v1.7.0 on (nor a
// 1.6 patch after v1.6.3), no Consul from v1.15 on, no pseudo-version of
// either and no podman driver plugin (it links Nomad v1.11.3) is built, or
// linked from the cache: the script stops with the reason before fetching
// anything. The open releases build.
func TestBuildHashicorp_RefusesNonOpenSource(t *testing.T) {
	cases := []struct {
		name, version string
		want          string // "" builds
	}{
		{"nomad", "v1.6.1", ""},
		{"nomad", "v1.6.3", ""},
		{"nomad", "v1.6.4", "only Nomad up to v1.6.3 is open source (MPL-2.0): v1.7.0 and later are under the BUSL-1.1"},
		{"nomad", "v1.7.0", "v1.7.0 and later are under the BUSL-1.1"},
		{"nomad", "v1.11.3", "NOMAD_BIN"},
		{"nomad", "v2.0.0", "BUSL-1.1"},
		{"nomad", "v0.0.0-20260324203407-b27b0c2e019a", "only release tags (vX.Y.Z) are built"},
		{"nomad", "v1.6.1-rc1", "only release tags"},
		{"consul", "v1.14.11", ""},
		{"consul", "v1.15.0", "only Consul up to v1.14.x is built: v1.15 and v1.16 need its envoyextensions and troubleshoot"},
		{"consul", "v1.16.6", "v1.16.6 and v1.17 on are under the BUSL-1.1"},
		{"consul", "v1.22.3", "CONSUL_BIN"},
		{"nomad-driver-podman", "v0.6.5", "links Nomad v1.11.3"},
	}
	for _, tc := range cases {
		t.Run(tc.name+"@"+tc.version, func(t *testing.T) {
			root, env := scriptRoot(t, "go1.26.8")
			bin := filepath.Join(root, "build", "bin")
			if tc.want != "" { // a cached binary is not linked either
				must.NoError(t, os.MkdirAll(bin, 0o755))
				must.NoError(t, os.WriteFile(filepath.Join(bin, tc.name+"-"+tc.version), []byte("#!/bin/sh\n"), 0o755))
			}
			out, errOut, err := runScript(t, root, env, "build-hashicorp.sh", tc.name, tc.version)
			if tc.want == "" {
				must.NoError(t, err, must.Sprint(errOut))
				must.StrContains(t, out, "[4/4] built build/bin/"+tc.name+"-"+tc.version)
				return
			}
			must.Error(t, err)
			must.StrContains(t, errOut, "refusing to build "+tc.name+" "+tc.version+": ")
			must.StrContains(t, errOut, tc.want)
			must.StrNotContains(t, out, "[1/4]")
			_, err = os.Lstat(filepath.Join(bin, tc.name))
			must.True(t, os.IsNotExist(err), must.Sprint("build/bin/"+tc.name+" was linked"))
		})
	}
}

// TestBuildHashicorp_FailureShowsTheError: a failed compile prints the
// compiler's error, not the download lines.
func TestBuildHashicorp_FailureShowsTheError(t *testing.T) {
	root, env := scriptRoot(t, "go1.26.8")
	_, errOut, err := runScript(t, root, append(env, "FAKE_BUILD_FAIL=1"), "build-hashicorp.sh", "consul", "v1.14.11")
	must.Error(t, err)
	must.StrContains(t, errOut, "undefined: frobnicate")
	must.StrNotContains(t, errOut, "go: downloading")
}

// TestBuildHashicorp_AgentNeedsNewerGo: an agent whose go.mod needs a newer
// Go than the one on PATH stops before fetching its dependencies.
func TestBuildHashicorp_AgentNeedsNewerGo(t *testing.T) {
	root, env := scriptRoot(t, "go1.25.8")
	out, errOut, err := runScript(t, root, append(env, "FAKE_AGENT_GO=1.26.1"), "build-hashicorp.sh", "nomad", "v1.6.1")
	must.Error(t, err)
	must.StrContains(t, errOut, "nomad v1.6.1 (its go.mod) needs Go 1.26.1 or newer")
	must.StrNotContains(t, out, "[2/4]")
}

// fakeE2EGo is a `go` for scripts/e2e.sh: two packages, whose verbose test
// output has a test skipped for an agent feature (the second twice, as two
// subtests would), and a passing test.
const fakeE2EGo = `#!/usr/bin/env bash
case "$1" in
  list) printf 'm/e2e/a\nm/e2e/b\n' ;;
  test)
    for a in "$@"; do p=$a; done
    echo "=== RUN   TestPasses"
    echo "--- PASS: TestPasses (0.00s)"
    echo "=== RUN   TestNeeds_${p##*/}"
    echo "    features.go:10: SKIP-NEEDS-FEATURE: TestNeeds_${p##*/}: JWKS (/.well-known/jwks.json)"
    echo "    features.go:10: SKIP-NEEDS-FEATURE: TestNeeds_${p##*/}: JWKS (/.well-known/jwks.json)"
    echo "--- SKIP: TestNeeds_${p##*/} (0.00s)"
    echo "ok  	$p	0.01s" ;;
  *) echo "fake go: unexpected: $*" >&2; exit 2 ;;
esac
`

// TestE2EScript_ListsFeatureSkips: scripts/e2e.sh runs the packages with
// -v, keeps their verbose output in the logs, and ends by listing each test
// skipped for a newer agent feature once (also in skipped-features.txt).
func TestE2EScript_ListsFeatureSkips(t *testing.T) {
	root := t.TempDir()
	must.NoError(t, os.MkdirAll(filepath.Join(root, "scripts"), 0o755))
	b, err := os.ReadFile(filepath.Join("scripts", "e2e.sh"))
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(filepath.Join(root, "scripts", "e2e.sh"), b, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(root, "scripts", "cluster.sh"), []byte("#!/bin/sh\n"), 0o755))
	bin := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fakeE2EGo), 0o755))
	env := append(os.Environ(), "PATH="+bin+":/usr/bin:/bin", "E2E_PARALLEL=1", "E2E_BUILD_TARGETS=", "E2E_SKIP=")
	out, errOut, err := runScript(t, root, env, "e2e.sh")
	must.NoError(t, err, must.Sprint(out+errOut))
	must.StrContains(t, out, "[e2e-1] ok  \tm/e2e/a")
	must.StrNotContains(t, out, "TestPasses")
	must.StrContains(t, out, "==> e2e: 2 tests skipped: the agent lacks a feature they need")
	must.StrContains(t, out, "\n    TestNeeds_a: JWKS (/.well-known/jwks.json)\n    TestNeeds_b: JWKS (/.well-known/jwks.json)\n")
	listed, err := os.ReadFile(filepath.Join(root, "build", "e2e-logs", "skipped-features.txt"))
	must.NoError(t, err)
	must.Eq(t, 2, strings.Count(string(listed), "\n"))
	log, err := os.ReadFile(filepath.Join(root, "build", "e2e-logs", "a.log"))
	must.NoError(t, err)
	must.StrContains(t, string(log), "--- PASS: TestPasses")
}

// TestMakeDemo_InstallsBeforeBuilding: a fresh machine's `make demo`
// installs the container runtimes it needs before it spends minutes on the
// agents (it used to fail after them, at the image step). Agent versions
// that are not built here make make print their build steps.
func TestMakeDemo_InstallsBeforeBuilding(t *testing.T) {
	out, err := exec.Command("make", "-n", "demo", "NOMAD_VERSION=v1.6.2", "CONSUL_VERSION=v1.14.10").CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	lines := strings.Split(string(out), "\n")
	install, build := -1, -1
	for i, l := range lines {
		switch {
		case install < 0 && strings.Contains(l, "scripts/install-e2e-deps.sh --demo"):
			install = i
		case build < 0 && strings.Contains(l, "scripts/build-hashicorp.sh"):
			build = i
		}
	}
	must.NonNegative(t, install, must.Sprintf("make demo installs nothing:\n%s", out))
	must.NonNegative(t, build, must.Sprintf("make demo builds no agent:\n%s", out))
	must.Less(t, build, install, must.Sprintf("make demo builds before it installs:\n%s", out))
}

func TestInstallE2EDeps_RefusesUnknownArguments(t *testing.T) {
	out, err := exec.Command("scripts/install-e2e-deps.sh", "--everything").CombinedOutput()
	must.Error(t, err)
	must.StrContains(t, string(out), "unknown argument '--everything'")
}
