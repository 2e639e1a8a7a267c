package simulated

import (
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/internal/interference"
)

// keepOccupancy rewrites StateDir's occupancy files every scanTTL until
// the client closes.
func (c *Client) keepOccupancy() {
	defer close(c.occupancyDone)
	tick := time.NewTicker(scanTTL)
	defer tick.Stop()
	for {
		c.writeOccupancy()
		select {
		case <-tick.C:
		case <-c.closedCh:
			return
		}
	}
}

// writeOccupancy writes, for every GPU whose holders changed since the last
// pass (and every GPU on the first), its occupancy file: the reservations
// with a live process on it, their shares and their GPU use. A
// failed write is logged once and tried again on the next pass.
func (c *Client) writeOccupancy() {
	if err := os.MkdirAll(c.cfg.StateDir, 0o755); err != nil {
		c.warnOnce("state_dir", "simulated state_dir unusable; no occupancy files", "error", err)
		return
	}
	tasks := c.scan()
	for _, g := range c.gpus {
		usage := c.cfg.GPUs[g.Index].ProcessSMPercent
		occ := &interference.Occupancy{Simulated: true, GPU: g.UUID, MPS: c.cfg.MPS, Holders: holdersOf(tasks, g.UUID, usage)}
		key, _ := json.Marshal(occ)
		if c.occupied[g.UUID] == string(key) {
			continue
		}
		occ.Updated = c.now().UTC()
		if err := interference.WriteFile(c.cfg.StateDir, occ); err != nil {
			c.warnOnce("occupancy:"+g.UUID, "writing a simulated GPU's occupancy file failed", "gpu", g.UUID, "error", err)
			continue
		}
		c.occupied[g.UUID] = string(key)
	}
}

// holdersOf lists the tasks that hold uuid, by reservation, each with its
// stated GPU use, else the GPU's configured usage (as Status reports them).
func holdersOf(tasks []taskProcess, uuid string, usage uint32) []interference.Holder {
	out := []interference.Holder{}
	for _, t := range tasks {
		pos := -1
		for i, v := range t.visible {
			if v == uuid {
				pos = i
			}
		}
		if pos < 0 {
			continue
		}
		sm := usage
		if t.smPercent != nil {
			sm = *t.smPercent
		}
		h := interference.Holder{Reservation: t.token, PID: t.pid, SMPercent: &sm}
		for _, id := range t.shareIDs {
			if strings.HasPrefix(id, uuid+shareSep) {
				h.Shares++
			}
		}
		if pos < len(t.fractions) {
			if f, err := strconv.ParseFloat(t.fractions[pos], 64); err == nil && f > 0 && f <= 1 {
				h.Fraction = f
			}
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reservation < out[j].Reservation })
	return out
}

// warnOnce logs msg once per key.
func (c *Client) warnOnce(key, msg string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warned[key] {
		return
	}
	c.warned[key] = true
	c.cfg.Logger.Warn(msg, args...)
}

// TaskEnv is what a task that reserves simulated GPUs gets besides the
// plugin's own variables: the state directory (read-only) whose occupancy
// files drive the trainer's MODELLED interference.
func (c *Client) TaskEnv() (env map[string]string, readOnlyDirs []string) {
	if c.cfg.StateDir == "" {
		return nil, nil
	}
	return map[string]string{interference.EnvStateDir: c.cfg.StateDir}, []string{c.cfg.StateDir}
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
