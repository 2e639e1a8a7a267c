package ui

import (
	"net/http"
	"strconv"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// queuesData is the Queues page: the last round's team queues and each
// job's queue verdict.
type queuesData struct {
	Round *manager.Round
}

func (s *Server) queues(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "queues", page{Title: "queues", Nav: "queues", Data: queuesData{Round: s.Planner.Last()}})
}

// fmtGPUs prints milli-GPUs as GPUs ("1.5").
func fmtGPUs(m int) string {
	return strconv.FormatFloat(float64(m)/policy.MilliGPU, 'f', -1, 64)
}

func init() { funcs["gpus"] = fmtGPUs }
