package harness

// Agent features some e2e tests need and older open-source agents (Nomad
// 1.6) lack. A test asks NeedsFeature; on an agent without the feature it
// skips, printing one stable line that `make test` can collect:
//
//	SKIP-NEEDS-FEATURE: <test>: <feature>
//
// Every feature is detected by what the agent does, never by its version
// string, and each answer is kept per agent address for the test process.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/service/ingest"
)

// Feature is an agent capability a test may need.
type Feature string

// The features tests name.
const (
	// FeatureJWKS: the agent publishes its workload identity keys at
	// /.well-known/jwks.json (Nomad 1.7 on; 1.6 answers 404).
	FeatureJWKS Feature = "JWKS at /.well-known/jwks.json"
	// FeatureNamedIdentities: identity blocks with name, aud and ttl
	// (Nomad 1.7 on).
	FeatureNamedIdentities Feature = "named workload identities (identity name/aud/ttl)"
	// FeatureKeyringNowForce: `operator root keyring rotate -now` and
	// `remove -force` (Nomad 1.8.3 on).
	FeatureKeyringNowForce Feature = "keyring rotate -now and remove -force"
	// FeatureScaleIndex: a scale's JobModifyIndex is enforced (Nomad 1.8.2
	// on; before, it is silently ignored).
	FeatureScaleIndex Feature = "scale requests enforce JobModifyIndex"
)

// SkipNeedsFeaturePrefix starts the line a skipped test prints.
const SkipNeedsFeaturePrefix = "SKIP-NEEDS-FEATURE:"

// skipOut receives the SKIP-NEEDS-FEATURE lines (tests replace it).
var skipOut io.Writer = os.Stdout

var (
	featureMu    sync.Mutex
	featureCache = map[string]featureAnswer{} // by agent address and feature
)

type featureAnswer struct {
	has bool
	err error
}

// NeedsFeature skips t, with the stable SKIP-NEEDS-FEATURE line, when c's
// agent lacks f. A failed detection fails the test. coveredBy names the
// tests that back the same claim on an agent without f (they run in `make
// test` on every agent); the line ends with them:
//
//	SKIP-NEEDS-FEATURE: <test>: <feature>; covered without it by <tests>
func NeedsFeature(t *testing.T, c *C, f Feature, coveredBy ...string) {
	t.Helper()
	has, err := c.HasFeature(t, f)
	if err != nil {
		t.Fatalf("detecting agent feature %q: %v", f, err)
	}
	if !has {
		line := fmt.Sprintf("%s %s: %s", SkipNeedsFeaturePrefix, t.Name(), f)
		if len(coveredBy) > 0 {
			line += "; covered without it by " + strings.Join(coveredBy, ", ")
		}
		fmt.Fprintln(skipOut, line) // stdout, so `go test` output carries it even without -v
		t.Skip(line)
	}
}

// HasFeature reports whether c's agent offers f.
func (c *C) HasFeature(t testing.TB, f Feature) (bool, error) {
	t.Helper()
	key := c.NomadAddr + " " + string(f)
	featureMu.Lock()
	defer featureMu.Unlock()
	if a, ok := featureCache[key]; ok {
		return a.has, a.err
	}
	var a featureAnswer
	switch f {
	case FeatureJWKS:
		a.has, a.err = c.hasJWKS()
	case FeatureNamedIdentities:
		a.has, a.err = c.parsesNamedIdentity(t)
	case FeatureKeyringNowForce:
		a.has, a.err = c.hasKeyringNowForce(t)
	case FeatureScaleIndex:
		a.has, a.err = c.enforcesScaleIndex()
	default:
		a.err = fmt.Errorf("unknown feature %q", f)
	}
	featureCache[key] = a
	return a.has, a.err
}

func (c *C) hasJWKS() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return ingest.JWKSOffered(ctx, nil, c.NomadAddr+"/.well-known/jwks.json")
}

// parsesNamedIdentity validates a jobspec with a named identity with the
// agent's CLI (which the agent's own validate endpoint then checks).
func (c *C) parsesNamedIdentity(t testing.TB) (bool, error) {
	dir, err := os.MkdirTemp("", "caravan-feature-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "named.nomad.hcl")
	spec := `job "caravan-feature-probe" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      identity {
        name = "probe"
        aud  = ["caravan-feature-probe"]
        ttl  = "1h"
      }
    }
  }
}
`
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		return false, err
	}
	out, err := c.CLI(t, "job", "validate", path)
	switch {
	case err == nil:
		return true, nil
	case strings.Contains(out, "Unsupported argument"):
		return false, nil
	}
	return false, err
}

// hasKeyringNowForce reads the CLI's help of both subcommands.
func (c *C) hasKeyringNowForce(t testing.TB) (bool, error) {
	rotate, _ := c.CLI(t, "operator", "root", "keyring", "rotate", "-h")
	remove, _ := c.CLI(t, "operator", "root", "keyring", "remove", "-h")
	if !strings.Contains(rotate, "keyring rotate") || !strings.Contains(remove, "keyring remove") {
		return false, fmt.Errorf("unexpected keyring help: %q / %q", Tail(rotate, 3), Tail(remove, 3))
	}
	return strings.Contains(rotate, "-now") && strings.Contains(remove, "-force"), nil
}

// enforcesScaleIndex registers a job of count 0 (it places nothing), scales
// it with an index it cannot have, and purges it: an agent that enforces
// the index refuses the scale.
func (c *C) enforcesScaleIndex() (bool, error) {
	id := fmt.Sprintf("caravan-feature-probe-%d", time.Now().UnixNano())
	zero := 0
	job := nomadapi.NewBatchJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	job.TaskGroups = []*nomadapi.TaskGroup{{
		Name: ptrTo("g"), Count: &zero,
		Tasks: []*nomadapi.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"}}},
	}}
	resp, _, err := c.Nomad.Jobs().Register(job, nil)
	if err != nil {
		return false, fmt.Errorf("registering the probe job: %w", err)
	}
	defer func() { _, _, _ = c.Nomad.Jobs().Deregister(id, true, nil) }()
	count := int64(0)
	_, _, err = c.Nomad.Jobs().ScaleWithRequest(id, &nomadapi.ScalingRequest{
		Count: &count, Target: map[string]string{"Job": id, "Group": "g"},
		JobModifyIndex: resp.JobModifyIndex + 1<<40, Message: "caravan e2e: scale index probe",
	}, nil)
	var ue nomadapi.UnexpectedResponseError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ue) && strings.Contains(ue.Body(), nomadapi.RegisterEnforceIndexErrPrefix):
		return true, nil
	}
	return false, fmt.Errorf("scaling the probe job: %w", err)
}

func ptrTo[T any](v T) *T { return &v }
