package submit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// TestWriter_ForbiddenNamesCapability: a 403 from Nomad (the token's ACL
// policy lacks the capability) is ErrForbidden, naming the capability and
// the policy that grants it, not a retryable rejection.
func TestWriter_ForbiddenNamesCapability(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // read-job granted
			job := fakenomad.TrainingJob("a", 1, nil)
			idx := uint64(7)
			job.JobModifyIndex = &idx
			_ = json.NewEncoder(w).Encode(job)
			return
		}
		http.Error(w, "Permission denied", http.StatusForbidden)
	}))
	defer srv.Close()
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	must.NoError(t, err)
	w := &Writer{Client: client, Logger: hclog.NewNullLogger()}
	ctx := context.Background()

	_, err = w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: 3, JobModifyIndex: 7})
	must.ErrorIs(t, err, ErrForbidden)
	must.False(t, errors.Is(err, ErrRejected))
	must.ErrorContains(t, err, "needs the scale-job capability (policy jobspecs/acl/planner-nomad.policy.hcl)")

	_, err = w.Register(ctx, fakenomad.TrainingJob("a", 1, nil), 7, "ps change")
	must.ErrorIs(t, err, ErrForbidden)
	must.ErrorContains(t, err, "registering /a")
	must.ErrorContains(t, err, "needs the submit-job capability (policy jobspecs/acl/planner-nomad-register.policy.hcl)")
	must.ErrorContains(t, err, "Permission denied")
}
