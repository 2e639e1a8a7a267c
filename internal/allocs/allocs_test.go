package allocs

import (
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// A job purged and submitted again under its ID: Nomad 1.6 still lists the
// first one's allocations under the ID; they are not the new job's.
func TestCurrent_LeavesOutAPurgedJobsAllocations(t *testing.T) {
	created := uint64(100)
	job := &nomadapi.Job{CreateIndex: &created}
	old := &nomadapi.AllocationListStub{ID: "old", CreateIndex: 40, ClientStatus: "complete"}
	cur := &nomadapi.AllocationListStub{ID: "cur", CreateIndex: 101, ClientStatus: "running"}
	same := &nomadapi.AllocationListStub{ID: "same", CreateIndex: 100, ClientStatus: "pending"}
	got := Current(job, []*nomadapi.AllocationListStub{cur, same, old})
	must.Eq(t, []*nomadapi.AllocationListStub{cur, same}, got)
	// Without a create index (a fake), nothing is left out.
	must.SliceLen(t, 3, Current(&nomadapi.Job{}, []*nomadapi.AllocationListStub{cur, same, old}))
}
