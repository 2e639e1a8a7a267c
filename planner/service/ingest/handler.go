package ingest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/progress"
)

// ErrForbidden is what an Authorizer returns for a valid identity that may
// not report (the job is not managed, the allocation is gone).
var ErrForbidden = errors.New("forbidden")

// Authorizer decides whether a verified workload may report progress.
type Authorizer func(Identity) error

// Handler serves POST /v1/progress.
type Handler struct {
	Verifier  TokenVerifier
	Store     *Store
	Clock     clock.Clock
	Authorize Authorizer
	Logger    hclog.Logger
	// OnSample, if set, is called after a sample is stored.
	OnSample func(JobKey, Record)
	// RefusalLogEvery bounds how often reports refused because their
	// token cannot be verified now are logged (DefaultRefusalLogEvery).
	RefusalLogEvery time.Duration

	refusals refusalLog
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeBody(w, code, progress.ErrorBody{Error: msg})
}

func writeBody(w http.ResponseWriter, code int, body progress.ErrorBody) {
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="caravan-planner"`)
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// badSample answers 400, naming the field at fault when there is one.
func badSample(w http.ResponseWriter, err error) {
	body := progress.ErrorBody{Error: err.Error()}
	var fe *progress.FieldError
	if errors.As(err, &fe) {
		body.Field = fe.Field
	}
	writeBody(w, http.StatusBadRequest, body)
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	auth := r.Header.Get("Authorization")
	token, found := strings.CutPrefix(auth, "Bearer ")
	if !found || strings.TrimSpace(token) == "" {
		writeError(w, http.StatusUnauthorized, "missing Authorization: Bearer <Nomad workload identity token>")
		return
	}
	id, err := h.Verifier.Verify(r.Context(), strings.TrimSpace(token))
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			h.Logger.Debug("refused progress report", "error", err, "remote", r.RemoteAddr)
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		every := h.RefusalLogEvery
		if every <= 0 {
			every = DefaultRefusalLogEvery
		}
		h.refusals.refused(h.Logger, every, h.Clock.Now(), err)
		writeError(w, http.StatusServiceUnavailable, "cannot verify token now: "+err.Error())
		return
	}
	h.refusals.verified(h.Logger, h.Clock.Now())
	if h.Authorize != nil {
		if err := h.Authorize(id); err != nil {
			writeError(w, http.StatusForbidden, err.Error())
			return
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	// Unknown fields are ignored (a trainer may send its own job/alloc
	// fields): which job a sample belongs to comes only from the token.
	s, err := progress.Decode(r.Body)
	if err != nil {
		badSample(w, err)
		return
	}
	key := JobKey{Namespace: id.Namespace, ID: id.JobID}
	rec := Record{Sample: s, Time: h.Clock.Now(), AllocationID: id.AllocationID, Task: id.Task}
	if err := h.Store.AddPlausible(key, rec); err != nil {
		h.Logger.Warn("refused implausible progress report", "job", id.JobID, "namespace", id.Namespace,
			"allocation_id", id.AllocationID, "error", err)
		badSample(w, err)
		return
	}
	if h.OnSample != nil {
		h.OnSample(key, rec)
	}
	w.WriteHeader(http.StatusNoContent)
}
