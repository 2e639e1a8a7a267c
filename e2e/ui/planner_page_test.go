package ui

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/demo"
	"github.com/caravan-nomad/caravan/e2e/harness"
)

// plannerPages opens each page of the planner's own web page while the
// demo's elastic jobs run: the GPU/share table must match Nomad's
// allocations, the job page must draw the fitted loss curve, and the
// Consul service meta must link the page. Screenshots land next to the
// Nomad UI's.
func plannerPages(t *testing.T, c *harness.C, browser context.Context, addr string) {
	start := time.Now()
	defer func() { t.Logf("planner pages checked in %s", time.Since(start).Round(time.Millisecond)) }()
	base := "http://" + addr + "/ui"

	entries, _, err := c.Consul.Health().Service("caravan-planner", "", true, nil)
	must.NoError(t, err)
	must.SliceNotEmpty(t, entries)
	must.Eq(t, base, entries[0].Service.Meta["caravan_ui"])

	// Cluster: every share row names the allocation Nomad says holds it.
	harness.PageText(t, browser, base+"/cluster", time.Minute, "GPUs and their shares", "shares held", "MiB")
	harness.Eventually(t, time.Minute, func() error {
		if err := chromedp.Run(browser, chromedp.Navigate(base+"/cluster")); err != nil {
			return err
		}
		var rows [][]string
		if err := chromedp.Run(browser, chromedp.Evaluate(
			`Array.from(document.querySelectorAll('tr.share-row')).flatMap(r => r.dataset.shares.split(' ').map(id => [id, r.dataset.alloc]))`, &rows)); err != nil {
			return err
		}
		want, err := heldShares(c.Nomad)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, r := range rows {
			if len(r) == 2 && r[1] != "" {
				got[r[0]] = r[1]
			}
		}
		if len(rows) == 0 || fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
			return fmt.Errorf("page shows holders %v, Nomad %v (%d share rows)", sorted(got), sorted(want), len(rows))
		}
		return nil
	})
	c.Screenshot(t, browser, "planner-cluster")

	harness.PageText(t, browser, base+"/jobs", time.Minute, append([]string{"Jobs managed by the planner"}, demo.ElasticJobs...)...)
	c.Screenshot(t, browser, "planner-jobs")

	// One job: the fitted Optimus curve is drawn, as is the speed model.
	job := base + "/jobs/default/" + demo.ElasticJobs[0]
	harness.PageText(t, browser, job, time.Minute, "loss: reported and fitted", "Options", "Timeline", "caravan planner:")
	harness.Eventually(t, time.Minute, func() error {
		if err := chromedp.Run(browser, chromedp.Navigate(job)); err != nil {
			return err
		}
		var fit bool
		if err := chromedp.Run(browser, chromedp.Evaluate(
			`(() => { const p = document.querySelector('svg path#loss-fit.fit-curve'); return !!p && p.getAttribute('d').length > 20 })()`, &fit)); err != nil {
			return err
		}
		if !fit {
			return fmt.Errorf("no fitted loss curve on %s yet", job)
		}
		return nil
	})
	c.Screenshot(t, browser, "planner-job")

	harness.PageText(t, browser, base+"/plan", time.Minute, "Candidates", demo.ElasticJobs[0])
	c.Screenshot(t, browser, "planner-plan")
}

// heldShares maps each caravan GPU share held by a running allocation to
// that allocation, as Nomad's API reports it.
func heldShares(n *nomadapi.Client) (map[string]string, error) {
	stubs, _, err := n.Allocations().List(&nomadapi.QueryOptions{Namespace: "*", Params: map[string]string{"resources": "true"}})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, a := range stubs {
		if a.ClientStatus != "running" || a.AllocatedResources == nil {
			continue
		}
		for _, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				if d.Vendor != "caravan" {
					continue
				}
				for _, id := range d.DeviceIDs {
					out[id] = a.ID
				}
			}
		}
	}
	return out, nil
}

func sorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
