package httpapi

import (
	"net/http"

	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// GPUsResponse is GET /v1/gpus: live packing's view of every GPU in the
// last round (planner/POLICY.md, "Live packing").
type GPUsResponse struct {
	Leader  bool                 `json:"leader"`
	Packing *manager.PackingView `json:"packing"`
}

func (s *Server) gpus(w http.ResponseWriter, r *http.Request) {
	last := s.Rounds.Last()
	if last == nil || last.Packing == nil {
		writeError(w, http.StatusServiceUnavailable, "no decision round with a packing view yet")
		return
	}
	writeJSON(w, http.StatusOK, GPUsResponse{Leader: s.Leader.IsLeader(), Packing: last.Packing})
}
