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

// tailXidFile polls XidFile from offset and raises one Xid per new line
// "<gpu> <xid>", where <gpu> is a UUID or a GPU index. Malformed lines are
// ignored.
func (c *Client) tailXidFile(ctx context.Context, offset int64, send func(nvml.XidEvent) bool) {
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

// xidFileStart is where tailing starts: lines already in the file when the
// watch begins are history, not events.
func (c *Client) xidFileStart() int64 {
	info, err := os.Stat(c.cfg.XidFile)
	if err != nil {
		return 0
	}
	return info.Size()
}

func (c *Client) readXidFile(offset int64, send func(nvml.XidEvent) bool) int64 {
	f, err := os.Open(c.cfg.XidFile)
	if err != nil {
		return offset
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return offset
	}
	if info.Size() < offset {
		// Truncated: start over.
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
