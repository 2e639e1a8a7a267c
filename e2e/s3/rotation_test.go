package s3

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// randomKey returns n random characters from [A-Z0-9].
func randomKey(t *testing.T, n int) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, err := rand.Read(b)
	must.NoError(t, err)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// rotateClientKey gives the clients' identity a new key in the server's
// identities file, revoking the old one, rewrites the clients' credentials
// file with it (in place, as an operator or a secrets agent does), and
// restarts the server so that it knows only the new key
// (scripts/cluster/s3.sh starts it with -s3.config).
func rotateClientKey(t *testing.T, c *harness.C, s harness.S3) (oldKey, newKey string) {
	t.Helper()
	oldKey, _ = harness.Credentials(t, s.CredentialsFile)
	newKey, secret := randomKey(t, 20), randomKey(t, 40)
	path := filepath.Join(filepath.Dir(s.CredentialsFile), "identities.json")
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	var conf struct {
		Identities []map[string]any `json:"identities"`
	}
	must.NoError(t, json.Unmarshal(b, &conf))
	found := false
	for _, id := range conf.Identities {
		if id["name"] == "caravan-clients" {
			id["credentials"] = []map[string]string{{"accessKey": newKey, "secretKey": secret}}
			found = true
		}
	}
	must.True(t, found, must.Sprintf("no caravan-clients identity in %s", path))
	b, err = json.MarshalIndent(conf, "", "  ")
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(path, b, 0o600))
	must.NoError(t, os.WriteFile(s.CredentialsFile,
		fmt.Appendf(nil, "[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", newKey, secret), 0o600))
	c.StopS3(t)
	c.StartS3(t)
	return oldKey, newKey
}

// TestS3_RotatedKeyPickedUp (issue 29, item 4): while the trainer commits
// every few seconds, the clients' key is rotated: the credentials file is
// rewritten with a new key and the server revokes the old one. The
// plugins, never restarted, commit with the new key (a checkpoint after
// the rotation is saved), the checkpoint at stop is
// saved and restored on the other client, and the run ends bit for bit.
// Before, the plugins read the key once, at start, and every commit after
// the rotation failed with 403 InvalidAccessKeyId until they restarted.
func TestS3_RotatedKeyPickedUp(t *testing.T) {
	c, s := s3Cluster(t)
	want := harness.TrainerReference(t, c.Bin, steps)
	c.Eligible(t, "client2", false)
	runTrainer(t, c, "job_type=service", "hold=true", "checkpoint_interval=2s")
	a1 := c.WaitRunning(t, trainJob, trainTask, nil)
	periodic := c.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (periodic)")

	oldKey, newKey := rotateClientKey(t, c, s)
	t.Logf("rotated the clients' key %s... to %s... after generation %s", oldKey[:4], newKey[:4], periodic.Details["generation"])
	// The old key is refused now.
	code, body := s.Request(t, oldKey, "not-the-secret", "GET", s.Bucket+"?list-type=2&max-keys=1", nil)
	must.Eq(t, 403, code, must.Sprint(body))

	// A commit after the rotation is saved, by the plugin that read the
	// old key (the periodic commits every 2 s; an on-demand request would
	// be taken by the next of them).
	rotatedAt := time.Now()
	harness.Eventually(t, 2*time.Minute, func() error {
		for _, e := range c.TaskEvents(t, a1.ID, trainTask) {
			if strings.HasPrefix(e.DriverMessage, "Checkpoint saved") && time.Unix(0, e.Time).After(rotatedAt) {
				t.Logf("after the rotation: %s", e.DriverMessage)
				return nil
			}
		}
		return fmt.Errorf("no checkpoint saved since the rotation")
	})

	c.Eligible(t, "client2", true)
	c.Eligible(t, "client1", false)
	_, err := c.CLI(t, "alloc", "stop", "-detach", a1.ID)
	must.NoError(t, err)
	stopped := c.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (stop)")
	a2 := c.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true})
	must.Eq(t, "client2", c.NodeName(t, a2.NodeID))
	restored := c.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint restored")
	must.Eq(t, stopped.Details["generation"], restored.Details["generation"])
	c.WaitTrainerFinal(t, a2.ID, steps, want, true)
}
