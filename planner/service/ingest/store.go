package ingest

import (
	"sort"
	"sync"
	"time"
)

// JobKey names a job for the store (namespace and ID).
type JobKey struct {
	Namespace string
	ID        string
}

// Store keeps the recent progress of every job, bounded per job.
type Store struct {
	mu     sync.Mutex
	max    int
	series map[JobKey][]Record
}

// NewStore keeps up to max records per job.
func NewStore(max int) *Store {
	return &Store{max: max, series: map[JobKey][]Record{}}
}

// Add stores a record.
func (s *Store) Add(k JobKey, r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(k, r)
}

func (s *Store) addLocked(k JobKey, r Record) {
	list := append(s.series[k], r)
	if len(list) > s.max {
		// Drop the oldest quarter at once, so Add stays amortised O(1).
		drop := len(list) - s.max + s.max/4
		list = append([]Record(nil), list[drop:]...)
	}
	s.series[k] = list
}

// AddPlausible stores a record unless its step advanced implausibly fast
// since the job's newest record (Sample.ValidateAfter); the check and the
// add are one step, so concurrent reports cannot slip past each other.
func (s *Store) AddPlausible(k JobKey, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if list := s.series[k]; len(list) > 0 {
		prev := list[len(list)-1]
		if err := r.Sample.ValidateAfter(prev.Sample, r.Time.Sub(prev.Time)); err != nil {
			return err
		}
	}
	s.addLocked(k, r)
	return nil
}

// Records returns a copy of a job's records, oldest first.
func (s *Store) Records(k JobKey) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.series[k]...)
}

// Latest returns the newest record of a job.
func (s *Store) Latest(k JobKey) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.series[k]
	if len(list) == 0 {
		return Record{}, false
	}
	return list[len(list)-1], true
}

// Forget drops jobs not in keep (jobs that were purged).
func (s *Store) Forget(keep map[JobKey]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.series {
		if !keep[k] {
			delete(s.series, k)
		}
	}
}

// Keys lists the jobs with records, sorted.
func (s *Store) Keys() []JobKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]JobKey, 0, len(s.series))
	for k := range s.series {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].ID < keys[j].ID
	})
	return keys
}

// Rate is a job's measured speed over the records received after since:
// the global step's progress per second (data-parallel workers share the
// global step, so this is the job's step rate whatever its worker count), the
// summed newest samples_per_sec of each reporting allocation, and how many
// allocations reported. ok is false without two records at different steps.
func (s *Store) Rate(k JobKey, since time.Time) (stepsPerSec, samplesPerSec float64, reporters int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.series[k]
	var first, last *Record
	newest := map[string]float64{}
	for i := len(list) - 1; i >= 0; i-- {
		r := &list[i]
		if r.Time.Before(since) {
			break
		}
		if _, seen := newest[r.AllocationID]; !seen {
			newest[r.AllocationID] = r.SamplesPerSec
		}
		if last == nil || r.Step > last.Step {
			last = r
		}
		if first == nil || r.Step <= first.Step {
			first = r
		}
	}
	for _, v := range newest {
		samplesPerSec += v
	}
	if first == nil || last == nil || last.Step <= first.Step {
		return 0, samplesPerSec, len(newest), false
	}
	dt := last.Time.Sub(first.Time).Seconds()
	if dt <= 0 {
		return 0, samplesPerSec, len(newest), false
	}
	return float64(last.Step-first.Step) / dt, samplesPerSec, len(newest), true
}
