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
	c.tailFile(ctx, c.cfg.XidFile, offset, func(line string) bool {
		if ev, ok := c.parseXidLine(line); ok {
			return send(ev)
		}
		return true
	})
}

// tailFile polls path from offset every xidFilePoll and hands each new
// complete line to handle until handle returns false, ctx is done or the
// client closes. A truncated file is read again from its start.
func (c *Client) tailFile(ctx context.Context, path string, offset int64, handle func(line string) bool) {
	tick := time.NewTicker(xidFilePoll)
	defer tick.Stop()
	for {
		var more bool
		offset, more = readLines(path, offset, handle)
		if !more {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		case <-c.closedCh:
			return
		}
	}
}

// fileSize is where tailing path starts: lines already in the file when the
// watch begins are history, not events.
func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// readLines hands path's complete lines after offset to handle; it returns
// the offset after the last line handed and false when handle asked to
// stop.
func readLines(path string, offset int64, handle func(line string) bool) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return offset, true
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return offset, true
	}
	if info.Size() < offset {
		// Truncated: start over.
		offset = 0
	}
	if _, err := f.Seek(offset, 0); err != nil {
		return offset, true
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// Keep a partial last line for the next poll.
			return offset, true
		}
		offset += int64(len(line))
		if !handle(line) {
			return offset, false
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
	uuid, ok := c.resolveGPU(fields[0])
	if !ok {
		return nvml.XidEvent{}, false
	}
	return nvml.XidEvent{UUID: uuid, Xid: xid, Time: c.now()}, true
}

// resolveGPU reads a fault file's GPU field: a UUID of this backend, or the
// index of one of its (non-MIG) GPUs.
func (c *Client) resolveGPU(name string) (string, bool) {
	if _, ok := c.byUUID[name]; ok {
		return name, true
	}
	idx, err := strconv.Atoi(name)
	if err != nil {
		return "", false
	}
	for _, g := range c.gpus {
		if !g.MIG && g.Index == idx {
			return g.UUID, true
		}
	}
	return "", false
}
