package s3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestS3_BadObjectsFallBack plants bad objects in the bucket under the two
// newest of three generations: an object with the wrong checksum in place
// of a chunk only generation 2 names, and generation 3's manifest naming a
// chunk that is gone. The replacement's restore says in an event that
// both failed verification and that it fell back to generation 1, resumes
// from generation 1's step, and the run ends bit for bit.
func TestS3_BadObjectsFallBack(t *testing.T) {
	c, s := s3Cluster(t)
	want := harness.TrainerReference(t, c.Bin, steps)

	runTrainer(t, c, "job_type=service", "hold=true")
	a1 := c.WaitRunning(t, trainJob, trainTask, nil)
	signal(t, c, a1.ID)
	g1 := savedAfter(t, c, a1.ID, "on demand", 0)
	signal(t, c, a1.ID)
	g2 := savedAfter(t, c, a1.ID, "on demand", mustInt(t, g1.Details["generation"]))
	_, err := c.CLI(t, "job", "scale", "-detach", trainJob, "train", "0")
	must.NoError(t, err)
	g3 := savedAfter(t, c, a1.ID, "stop", mustInt(t, g2.Details["generation"]))
	c.WaitTerminal(t, a1.ID, 2*time.Minute)
	for _, g := range []*nomadapi.TaskEvent{g1, g2, g3} {
		t.Logf("%s", g.DriverMessage)
	}
	must.Eq(t, []int{1, 2, 3}, []int{mustInt(t, g1.Details["generation"]), mustInt(t, g2.Details["generation"]),
		mustInt(t, g3.Details["generation"])}, must.Sprint("the job's store key had checkpoints before the test"))

	job, _, err := c.Nomad.Jobs().Info(trainJob, nil)
	must.NoError(t, err)
	m := manifests(t, s, *job.CreateIndex)
	planted := uniqueChunk(t, s, m, 2)
	ak, sk := harness.Credentials(t, s.AdminCredentialsFile)
	code, body := s.Request(t, ak, sk, "PUT", s.Bucket+"/"+planted.object, bytes.Repeat([]byte("x"), int(planted.size)))
	must.Eq(t, 200, code, must.Sprint(body))
	missing := uniqueChunk(t, s, m, 3)
	code, body = s.Request(t, ak, sk, "DELETE", s.Bucket+"/"+missing.object, nil)
	must.Eq(t, 204, code, must.Sprint(body))
	t.Logf("planted a %d-byte object with the wrong checksum at %s (generation 2); deleted %s (generation 3)",
		planted.size, planted.object, missing.object)

	_, err = c.CLI(t, "job", "scale", "-detach", trainJob, "train", "1")
	must.NoError(t, err)
	a2 := c.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true})
	fell := c.WaitDriverEvent(t, a2.ID, trainTask, "failed verification")
	t.Logf("restore: %s", fell.DriverMessage)
	must.StrContains(t, fell.DriverMessage, "generation [3 2] failed verification, fell back to generation 1")
	restored := c.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint restored")
	must.Eq(t, "1", restored.Details["generation"])
	must.StrContains(t, c.Logs(t, a2.ID, trainTask, "stdout"), "resumed step="+g1.Details["step"])
	c.WaitTrainerFinal(t, a2.ID, steps, want, true)
}

// savedAfter waits for a "Checkpoint saved (reason)" event of the
// allocation with a generation above gen.
func savedAfter(t *testing.T, c *harness.C, allocID, reason string, gen int) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		for _, e := range c.TaskEvents(t, allocID, trainTask) {
			if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, "Checkpoint saved ("+reason+")") &&
				mustInt(t, e.Details["generation"]) > gen {
				ev = e
				return nil
			}
		}
		return fmt.Errorf("no checkpoint saved (%s) after generation %d on %s", reason, gen, allocID)
	})
	return ev
}

// manifests reads, with the admin's keys, the manifests of the trainer's
// store key (the job incarnation of create index ci) by generation.
func manifests(t *testing.T, s harness.S3, ci uint64) map[uint64]*store.Manifest {
	t.Helper()
	ak, sk := harness.Credentials(t, s.AdminCredentialsFile)
	out := map[uint64]*store.Manifest{}
	for _, k := range bucketKeys(t, s, fmt.Sprintf("%s/keys/default/%s@%d/", s.Prefix, trainJob, ci)) {
		if !strings.Contains(k, "/gen-") {
			continue
		}
		// SigV4 signs the path URI-encoded: the incarnation's @ as %40.
		code, body := s.Request(t, ak, sk, "GET", s.Bucket+"/"+strings.ReplaceAll(k, "@", "%40"), nil)
		must.Eq(t, 200, code, must.Sprint(body))
		var m store.Manifest
		must.NoError(t, json.Unmarshal([]byte(body), &m), must.Sprint(k))
		out[m.Generation] = &m
	}
	return out
}

type chunkObject struct {
	object string
	size   int64
}

// uniqueChunk returns the object (the store's layout: <prefix>/chunks/ab/abcd...)
// of a chunk that generation gen names and no other generation does, the
// largest if there are several.
func uniqueChunk(t *testing.T, s harness.S3, ms map[uint64]*store.Manifest, gen uint64) chunkObject {
	t.Helper()
	m, ok := ms[gen]
	must.True(t, ok, must.Sprintf("no manifest of generation %d", gen))
	others := map[string]bool{}
	for g, o := range ms {
		if g == gen {
			continue
		}
		for _, f := range o.Files {
			for _, ch := range f.Chunks {
				others[ch] = true
			}
		}
	}
	var found []chunkObject
	for _, f := range m.Files {
		for i, ch := range f.Chunks {
			if others[ch] {
				continue
			}
			size := min(int64(m.ChunkSize), f.Size-int64(i)*int64(m.ChunkSize))
			found = append(found, chunkObject{object: s.Prefix + "/chunks/" + ch[:2] + "/" + ch, size: size})
		}
	}
	must.SliceNotEmpty(t, found, must.Sprintf("generation %d shares every chunk with another generation", gen))
	sort.Slice(found, func(i, j int) bool { return found[i].size > found[j].size })
	return found[0]
}
