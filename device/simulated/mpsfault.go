package simulated

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// ErrNoMPSFaultFile is WatchMPS's answer when no mps_fault_file is set: the
// simulated backend then has no MPS server to fail.
var ErrNoMPSFaultFile = errors.New("simulated: no mps_fault_file configured")

// WatchMPS raises one SIMULATED MPS server fault per line appended to
// MPSFaultFile after the watch starts: "<gpu> <reason...>", <gpu> being a
// UUID, a GPU index, or "*" for the whole server. Malformed lines are
// ignored.
func (c *Client) WatchMPS(ctx context.Context) (<-chan nvml.MPSFault, error) {
	if c.cfg.MPSFaultFile == "" {
		return nil, ErrNoMPSFaultFile
	}
	ch := make(chan nvml.MPSFault)
	start := fileSize(c.cfg.MPSFaultFile)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.tailFile(ctx, c.cfg.MPSFaultFile, start, func(line string) bool {
			f, ok := c.parseMPSFaultLine(line)
			if !ok {
				return true
			}
			select {
			case ch <- f:
				return true
			case <-ctx.Done():
			case <-c.closedCh:
			}
			return false
		})
	}()
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch, nil
}

func (c *Client) parseMPSFaultLine(line string) (nvml.MPSFault, bool) {
	gpu, reason, _ := strings.Cut(strings.TrimSpace(line), " ")
	reason = strings.TrimSpace(reason)
	if gpu == "" || reason == "" {
		return nvml.MPSFault{}, false
	}
	f := nvml.MPSFault{Reason: "simulated MPS server fault: " + reason, Time: c.now()}
	if gpu == "*" {
		return f, true
	}
	uuid, ok := c.resolveGPU(gpu)
	if !ok {
		return nvml.MPSFault{}, false
	}
	f.UUID = uuid
	return f, true
}
