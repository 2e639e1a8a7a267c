// Package ui checks, in a real headless browser, what Nomad's web UI shows a
// user of caravan.
package ui

import (
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestUI_ClientsListed opens the UI's client list and finds both clients,
// ready and eligible.
func TestUI_ClientsListed(t *testing.T) {
	c := harness.Cluster(t)
	ctx := harness.Browser(t, 2*time.Minute)
	harness.PageText(t, ctx, c.NomadAddr+"/ui/clients", time.Minute, "client1", "client2", "Ready", "Eligible")
	c.Screenshot(t, ctx, "clients")
}
