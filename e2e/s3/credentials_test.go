package s3

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestS3_ServerRefusesWrongCredentials checks the server the cluster
// started is not anonymous: unsigned requests, an unknown key and a wrong
// secret are refused, the clients' keys work on their bucket and nowhere
// else, and every key file is private.
func TestS3_ServerRefusesWrongCredentials(t *testing.T) {
	c := harness.Cluster(t)
	s := c.S3(t)
	ak, sk := harness.Credentials(t, s.CredentialsFile)
	obj := s.Bucket + "/" + s.Prefix + "/e2e-credentials-probe"
	list := s.Bucket + "?list-type=2&max-keys=1&prefix=" + s.Prefix + "%2F"

	code, body := s.Request(t, ak, sk, "PUT", obj, []byte("probe"))
	must.Eq(t, 200, code, must.Sprint(body))
	t.Cleanup(func() { s.Request(t, ak, sk, "DELETE", obj, nil) })
	code, body = s.Request(t, ak, sk, "GET", obj, nil)
	must.Eq(t, 200, code, must.Sprint(body))
	must.Eq(t, "probe", body)

	for _, tc := range []struct {
		name, ak, sk, code string
	}{
		{"anonymous", "", "", "AccessDenied"},
		{"unknown access key", "AKIANOTAKEYOFOURS000", sk, "InvalidAccessKeyId"},
		{"wrong secret", ak, sk[:len(sk)-1] + "x", "SignatureDoesNotMatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []struct {
				method, path string
				body         []byte
			}{
				{"GET", obj, nil},
				{"GET", list, nil},
				{"PUT", obj, []byte("overwritten")},
			} {
				code, body := s.Request(t, tc.ak, tc.sk, req.method, req.path, req.body)
				must.Eq(t, 403, code, must.Sprintf("%s %s: %s", req.method, req.path, body))
				must.StrContains(t, body, "<Code>"+tc.code+"</Code>")
			}
		})
	}
	// Nothing was overwritten.
	_, body = s.Request(t, ak, sk, "GET", obj, nil)
	must.Eq(t, "probe", body)

	// The clients' keys may not create buckets.
	code, body = s.Request(t, ak, sk, "PUT", "caravan-e2e-other", nil)
	must.Eq(t, 403, code, must.Sprint(body))

	for _, f := range []string{s.CredentialsFile, s.AdminCredentialsFile, s.OtherTeamCredentialsFile,
		filepath.Join(filepath.Dir(s.CredentialsFile), "identities.json")} {
		fi, err := os.Stat(f)
		must.NoError(t, err)
		must.Eq(t, os.FileMode(0o600), fi.Mode().Perm(), must.Sprint(f))
	}
}

// TestS3_PrefixKeepsTeamsApart checks the README's identities example: a
// team whose actions are scoped to bucket/other-team/* writes and lists its
// own prefix, and can neither read, list, overwrite nor delete this
// cluster's.
func TestS3_PrefixKeepsTeamsApart(t *testing.T) {
	c := harness.Cluster(t)
	s := c.S3(t)
	ak, sk := harness.Credentials(t, s.CredentialsFile)
	oak, osk := harness.Credentials(t, s.OtherTeamCredentialsFile)
	ours := s.Bucket + "/" + s.Prefix + "/e2e-team-probe"
	theirs := s.Bucket + "/other-team/e2e-team-probe"

	code, body := s.Request(t, ak, sk, "PUT", ours, []byte("ours"))
	must.Eq(t, 200, code, must.Sprint(body))
	t.Cleanup(func() { s.Request(t, ak, sk, "DELETE", ours, nil) })
	code, body = s.Request(t, oak, osk, "PUT", theirs, []byte("theirs"))
	must.Eq(t, 200, code, must.Sprint(body))
	t.Cleanup(func() { s.Request(t, oak, osk, "DELETE", theirs, nil) })

	code, body = s.Request(t, oak, osk, "GET", theirs, nil)
	must.Eq(t, 200, code, must.Sprint(body))
	code, body = s.Request(t, oak, osk, "GET", s.Bucket+"?list-type=2&prefix=other-team%2F", nil)
	must.Eq(t, 200, code, must.Sprint(body))
	must.StrContains(t, body, "<Key>other-team/e2e-team-probe</Key>")

	for _, req := range []struct {
		method, path string
		body         []byte
	}{
		{"GET", ours, nil},
		{"PUT", ours, []byte("overwritten")},
		{"DELETE", ours, nil},
		{"GET", s.Bucket + "?list-type=2&prefix=" + s.Prefix + "%2F", nil},
		{"GET", s.Bucket + "?list-type=2", nil},
	} {
		code, body := s.Request(t, oak, osk, req.method, req.path, req.body)
		must.Eq(t, 403, code, must.Sprintf("other team: %s %s: %s", req.method, req.path, body))
		must.StrNotContains(t, body, "<Contents>")
		must.StrNotContains(t, body, "ours")
	}
	_, body = s.Request(t, ak, sk, "GET", ours, nil)
	must.Eq(t, "ours", body)
}

// TestS3_PrefixScopedKeysRunThePlugin starts a driver plugin with the
// README's prefix-scoped identity (other-team: Read, Write and List on
// bucket/other-team/* only) and prefix other-team: the store must open
// and the driver report the checkpoint store reachable.
func TestS3_PrefixScopedKeysRunThePlugin(t *testing.T) {
	c, s := s3Cluster(t)
	a, _ := storeAgent(t, c, s, "s3team", 2, "other-team", s.OtherTeamCredentialsFile)
	harness.Eventually(t, time.Minute, func() error {
		node, _, err := a.C.Nomad.Nodes().Info(a.C.Clients[0].NodeID, nil)
		if err != nil {
			return err
		}
		if got := node.Attributes["driver.caravan.checkpoint_store"]; got != "true" {
			d := node.Drivers["caravan"]
			return fmt.Errorf("driver.caravan.checkpoint_store = %q (driver: %+v)", got, d)
		}
		return nil
	})
}
