package progress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// Path is where tasks POST their progress.
const Path = "/v1/progress"

// maxBody bounds a progress request body.
const maxBody = 64 << 10

// ErrForbidden is what an Authorizer returns for a valid identity that may
// not report (the job is not managed, the allocation is gone).
var ErrForbidden = errors.New("forbidden")

// Authorizer decides whether a verified workload may report progress.
type Authorizer func(Identity) error

// Handler serves POST /v1/progress.
type Handler struct {
	Verifier  *Verifier
	Store     *Store
	Clock     clock.Clock
	Authorize Authorizer
	Logger    hclog.Logger
	// OnSample, if set, is called after a sample is stored.
	OnSample func(JobKey, Record)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="caravan-planner"`)
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Error: msg})
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
		h.Logger.Warn("cannot verify progress token", "error", err)
		writeError(w, http.StatusServiceUnavailable, "cannot verify token now: "+err.Error())
		return
	}
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
	var s Sample
	// Unknown fields are ignored (a trainer may send its own job/alloc
	// fields): which job a sample belongs to comes only from the token.
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(&s); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("decoding progress sample: %v", err))
		return
	}
	if err := s.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	key := JobKey{Namespace: id.Namespace, ID: id.JobID}
	rec := Record{Sample: s, Time: h.Clock.Now(), AllocationID: id.AllocationID, Task: id.Task}
	h.Store.Add(key, rec)
	if h.OnSample != nil {
		h.OnSample(key, rec)
	}
	w.WriteHeader(http.StatusNoContent)
}
