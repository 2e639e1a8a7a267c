package s3

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	trainSpec = harness.TrainerSpec
	trainJob  = harness.TrainerJob
	trainTask = harness.TrainerTask
	// steps and stepDelay make an uninterrupted run last about 20s.
	steps     = 10000
	stepDelay = "2ms"
)

// s3Cluster is the shared cluster, which must run the S3 store, with both
// clients eligible and undrained again when the test ends.
func s3Cluster(t *testing.T) (*harness.C, harness.S3) {
	t.Helper()
	c := harness.Cluster(t)
	s := c.S3(t)
	reset := func() {
		for _, cl := range c.Clients {
			_, _ = c.Nomad.Nodes().UpdateDrain(cl.NodeID, nil, true, nil)
			_, _ = c.Nomad.Nodes().ToggleEligibility(cl.NodeID, true, nil)
		}
	}
	reset()
	t.Cleanup(reset)
	return c, s
}

// runTrainer runs the checkpointed trainer on c (the cluster or a
// standalone agent) and, when the test ends, stops it and waits for its
// allocations to stop before the harness purges it.
func runTrainer(t *testing.T, c *harness.C, vars ...string) {
	t.Helper()
	c.RunJobStoppedAtEnd(t, trainSpec, append([]string{"caravan_bin=" + c.Bin, "steps=" + strconv.Itoa(steps),
		"step_delay=" + stepDelay}, vars...)...)
}

var keyRe = regexp.MustCompile(`<Key>([^<]*)</Key>`)

// bucketKeys lists (with the admin's keys) the object names below prefix.
func bucketKeys(t *testing.T, s harness.S3, prefix string) []string {
	t.Helper()
	ak, sk := harness.Credentials(t, s.AdminCredentialsFile)
	var keys []string
	token := ""
	for {
		q := "?list-type=2&prefix=" + urlEscape(prefix)
		if token != "" {
			q = "?continuation-token=" + urlEscape(token) + "&list-type=2&prefix=" + urlEscape(prefix)
		}
		code, body := s.Request(t, ak, sk, "GET", s.Bucket+q, nil)
		must.Eq(t, 200, code, must.Sprint(body))
		for _, m := range keyRe.FindAllStringSubmatch(body, -1) {
			keys = append(keys, m[1])
		}
		next := regexp.MustCompile(`<NextContinuationToken>([^<]*)</NextContinuationToken>`).FindStringSubmatch(body)
		if next == nil {
			return keys
		}
		token = next[1]
	}
}

// urlEscape encodes s as SigV4 wants query values encoded.
func urlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// noSharedDirectory checks that the clients' driver plugins have no
// checkpoint directory: their config has a store block and no
// checkpoint_store, and no checkpoint lands in the cluster's directory.
func noSharedDirectory(t *testing.T, c *harness.C, s harness.S3) {
	t.Helper()
	for _, cl := range c.Clients {
		b, err := os.ReadFile(filepath.Join(c.Dir, "config", cl.Name+".hcl"))
		must.NoError(t, err)
		must.StrNotContains(t, string(b), "checkpoint_store")
		must.StrContains(t, string(b), "credentials_file = \""+s.CredentialsFile+"\"")
	}
	local, _ := filepath.Glob(filepath.Join(c.CheckpointDir, "default", trainJob+"*"))
	must.SliceEmpty(t, local, must.Sprint("checkpoints in the cluster's directory"))
}
