// Package ui checks, in a real headless browser, what Nomad's web UI shows a
// user of caravan after the demo scenario: the clients, the driver's
// checkpoint and restore events, and the planner's scaling events; and,
// while the demo's elastic jobs run, the planner's own page (GPU shares
// against Nomad's allocations, the fitted loss curve, the plan).
// Screenshots land in build/screenshots/.
package ui

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/demo"
	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestUI_ClientsListed opens the UI's client list and finds both clients,
// ready and eligible.
func TestUI_ClientsListed(t *testing.T) {
	c := harness.Cluster(t)
	ctx := harness.Browser(t, 2*time.Minute)
	// Both clients ready and eligible: Nomad 1.6's list shows only the
	// state (an ineligible client says so), later ones an eligibility column.
	text := harness.PageText(t, ctx, c.NomadAddr+"/ui/clients", time.Minute, "client1", "client2", "ready")
	must.StrNotContains(t, strings.ToLower(text), "ineligible")
	c.Screenshot(t, ctx, "clients")
}

// TestUI_DemoStory runs the demo scenario (the one `make demo` runs) on the
// cluster, then checks what the UI shows of it.
func TestUI_DemoStory(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t) // the demo's container job (trainer image)
	var story bytes.Buffer
	var out io.Writer = &story
	if testing.Verbose() {
		out = io.MultiWriter(os.Stdout, &story)
	}
	d, err := demo.New(demo.Config{
		Root:            c.Root,
		NomadBin:        c.NomadBin,
		CaravanBin:      c.Bin,
		NomadAddr:       c.NomadAddr,
		ConsulAddr:      strings.TrimPrefix(c.ConsulAddr, "http://"),
		StateDir:        c.CheckpointDir,
		CheckpointStore: c.CheckpointDir,
		Steps:           6000,
		// The planner's own page, while the elastic jobs run.
		WhilePlanning: func(_ context.Context, addr string) error {
			plannerPages(t, c, harness.Browser(t, 3*time.Minute), addr)
			return nil
		},
	}, out)
	must.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := d.Run(ctx)
	t.Cleanup(func() {
		for _, job := range append([]string{"train-checkpointed", "train-container", "caravan-planner"}, demo.ElasticJobs...) {
			c.StopJob(t, job)
		}
	})
	must.NoError(t, err)

	// What the demo itself saw, through the API.
	must.True(t, res.Sharing.SameGPU, must.Sprintf("fractional jobs on different GPUs: %+v", res.Sharing.Jobs))
	must.Eq(t, uint64(6000), res.Training.FinalStep)
	must.True(t, res.Training.Identical, must.Sprintf("suspended/migrated run %s != uninterrupted %s", res.Training.ParamsHash, res.Training.ReferenceHash))
	must.Positive(t, res.Training.SuspendedAt)
	must.Eq(t, res.Training.SuspendedAt, res.Training.ResumedAt)
	must.Greater(t, res.Training.ResumedAt, res.Training.MigratedAt)
	must.Len(t, 3, res.Training.Allocs)
	must.NotEq(t, res.Training.Nodes[1], res.Training.Nodes[2])
	must.Eq(t, uint64(6000), res.Container.FinalStep)
	must.True(t, res.Container.Identical, must.Sprintf("container job %s != uninterrupted %s", res.Container.ParamsHash, res.Container.ReferenceHash))
	must.Positive(t, res.Container.SuspendedAt)
	must.Eq(t, res.Container.SuspendedAt, res.Container.ResumedAt)
	must.MapNotEmpty(t, res.Planner.Decisions)
	must.NotEq(t, "", res.Planner.Grew)
	must.NotEq(t, "", res.Planner.MadeRoom)
	storyNamesJobs(t, c, story.String(), res)
	must.True(t, res.Planner.Identical, must.Sprintf("elastic jobs' params %+v != uninterrupted %s", res.Planner.Jobs, res.Planner.ReferenceHash))

	browser := harness.Browser(t, 3*time.Minute)

	// The suspended allocation's task shows the stop checkpoint; the
	// migrated one shows the restore, naming the node it came from.
	suspended, migrated := res.Training.Allocs[0], res.Training.Allocs[2]
	harness.PageText(t, browser, c.NomadAddr+"/ui/allocations/"+suspended+"/trainer", time.Minute,
		"Recent Events", "Checkpoint saved (stop)")
	c.Screenshot(t, browser, "task-checkpoint-saved")
	harness.PageText(t, browser, c.NomadAddr+"/ui/allocations/"+migrated+"/trainer", time.Minute,
		"Recent Events", "Checkpoint restored", "from "+res.Training.Nodes[1])
	c.Screenshot(t, browser, "task-checkpoint-restored")

	// The planner-managed job's group page shows the planner's scaling
	// events with their reasons.
	harness.PageText(t, browser, c.NomadAddr+"/ui/jobs/"+demo.ElasticJobs[0]+"@default/worker", time.Minute,
		"Recent Scaling Events", "caravan planner:")
	c.Screenshot(t, browser, "planner-scaling-events")

	// The client page lists the caravan driver, healthy, with its
	// checkpoint store attribute. (Nomad 1.11's UI has no device view: the
	// GPU shares and their stats are checked through the API in e2e/device.)
	node := c.Client(t, res.Training.Nodes[0])
	harness.PageText(t, browser, c.NomadAddr+"/ui/clients/"+node.NodeID, time.Minute,
		"caravan", "Healthy", "driver.caravan.checkpoint_store")
	c.Screenshot(t, browser, "client")

	shots, _ := filepath.Glob(filepath.Join(c.Root, "build", "screenshots", "*.png"))
	must.SliceNotEmpty(t, shots)
}

// storyNamesJobs: every line of the demo's story that reports an outcome
// names its job, the growth line names each of the first two elastic jobs,
// the shrink explains itself by its cause and cites no gain, and each
// elastic job has its own name in Nomad (its UI lists jobs by name).
func storyNamesJobs(t *testing.T, c *harness.C, story string, res *demo.Result) {
	t.Helper()
	for _, line := range strings.Split(story, "\n") {
		if strings.Contains(line, "finished:") || strings.Contains(line, "resumed at step") || strings.Contains(line, "Checkpoint ") {
			named := false
			for _, job := range append([]string{"train-checkpointed", "train-container"}, demo.ElasticJobs...) {
				named = named || strings.Contains(line, job)
			}
			must.True(t, named, must.Sprintf("a demo line names no job: %q", line))
		}
	}
	for _, job := range demo.ElasticJobs[:2] {
		must.StrContains(t, res.Planner.Grew, job+":")
	}
	must.StrNotContains(t, res.Planner.MadeRoom, "marginal gain")
	must.True(t, strings.Contains(res.Planner.MadeRoom, "make room for "+demo.ElasticJobs[2]) ||
		strings.Contains(res.Planner.MadeRoom, "reclaimed by queue"), must.Sprintf("made room: %q", res.Planner.MadeRoom))
	for _, job := range demo.ElasticJobs {
		j, _, err := c.Nomad.Jobs().Info(job, nil)
		must.NoError(t, err)
		must.Eq(t, job, *j.Name)
	}
}
