package simulated

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// tailXidFile polls XidFile and raises one Xid per new line "<gpu> <xid>",
// where <gpu> is a UUID or a GPU index. Lines present when the backend
// starts are skipped; malformed lines are ignored.
func (c *Client) tailXidFile(ctx context.Context, send func(nvml.XidEvent) bool) {
	var offset int64 = -1
	tick := time.NewTicker(xidFilePoll)
	defer tick.Stop()
	for {
		offset = c.readXidFile(offset, send)
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		case <-c.closedCh:
			return
		}
	}
}

func (c *Client) readXidFile(offset int64, send func(nvml.XidEvent) bool) int64 {
	f, err := os.Open(c.cfg.XidFile)
	if err != nil {
		if offset < 0 {
			return 0
		}
		return offset
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return offset
	}
	if offset < 0 || info.Size() < offset {
		// First look (skip history) or the file was truncated.
		if offset < 0 {
			return info.Size()
		}
		offset = 0
	}
	if _, err := f.Seek(offset, 0); err != nil {
		return offset
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// Keep a partial last line for the next poll.
			return offset
		}
		offset += int64(len(line))
		if ev, ok := c.parseXidLine(line); ok {
			if !send(ev) {
				return offset
			}
		}
	}
}

func (c *Client) parseXidLine(line string) (nvml.XidEvent, bool) {
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return nvml.XidEvent{}, false
	}
	xid, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return nvml.XidEvent{}, false
	}
	uuid := fields[0]
	if _, ok := c.byUUID[uuid]; !ok {
		idx, err := strconv.Atoi(uuid)
		if err != nil {
			return nvml.XidEvent{}, false
		}
		uuid = ""
		for _, g := range c.gpus {
			if !g.MIG && g.Index == idx {
				uuid = g.UUID
			}
		}
		if uuid == "" {
			return nvml.XidEvent{}, false
		}
	}
	return nvml.XidEvent{UUID: uuid, Xid: xid, Time: c.now()}, true
}
