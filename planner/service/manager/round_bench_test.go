package manager

import (
	"context"
	"fmt"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// staticSource is an in-memory Snapshotter for benchmarks.
type staticSource struct{ snap source.Snapshot }

func (s *staticSource) Snapshot() source.Snapshot { return s.snap }
func (s *staticSource) Changes() <-chan struct{}  { return nil }
func (s *staticSource) ScaleStatus(context.Context, source.JobKey) (*nomadapi.JobScaleStatusResponse, error) {
	return &nomadapi.JobScaleStatusResponse{}, nil
}

// benchRound measures one decision round (a convergence refit per job, speed
// models, the policy, actions; dry-run) for jobs managed jobs with 100+
// progress reports each, on nodes 4-GPU nodes.
func benchRound(b *testing.B, jobs, nodes int) {
	now := time.Now()
	snap := source.Snapshot{Synced: true, Jobs: map[source.JobKey]*source.Job{}}
	for i := 0; i < nodes; i++ {
		snap.Nodes = append(snap.Nodes, source.Node{ID: fmt.Sprintf("node-%d", i), Ready: true, GPUs: 4, SharesPerGPU: 4, Shares: 16})
	}
	store := ingest.NewStore(2000)
	for i := 0; i < jobs; i++ {
		id := fmt.Sprintf("job-%d", i)
		job := fakenomad.TrainingJob(id, 1+i%3, map[string]string{"caravan_max_workers": "8"})
		job.Canonicalize()
		idx, ver, sub := uint64(100+i), uint64(1), now.Add(-time.Hour).UnixNano()
		job.JobModifyIndex, job.Version, job.SubmitTime = &idx, &ver, &sub
		k := source.JobKey{Namespace: "default", ID: id}
		j := &source.Job{Key: k, Job: job}
		j.Spec, j.SpecErr = source.ParseSpec(job)
		snap.Jobs[k] = j
		b0 := 0.0002 + 0.0001*float64(i%7)
		for s := 1; s <= 100; s++ {
			step := int64(s * 20)
			store.Add(ingest.JobKey(k), ingest.Record{Sample: ingest.Sample{Step: step, Loss: 1/(b0*float64(step)+1) + 0.05, SamplesPerSec: 300},
				Time: now.Add(time.Duration(s-100) * time.Second), AllocationID: "a"})
		}
	}
	s := defaultSettings()
	s.DryRun = true
	s.GPUsPerNode = 0
	m, err := New(Config{Settings: s, Source: &staticSource{snap: snap}, Progress: store, Writer: failingWriter{}, Clock: clock.NewFake(now)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A new report per job since the last round: every job is refitted,
		// as in a live round.
		b.StopTimer()
		for k := range snap.Jobs {
			last, _ := store.Latest(ingest.JobKey(k))
			last.Step += 20
			last.Time = last.Time.Add(time.Second)
			store.Add(ingest.JobKey(k), last)
		}
		b.StartTimer()
		if _, err := m.RunRound(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRound_100Jobs_25Nodes(b *testing.B)   { benchRound(b, 100, 25) }
func BenchmarkRound_1000Jobs_250Nodes(b *testing.B) { benchRound(b, 1000, 250) }
