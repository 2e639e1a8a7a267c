package device

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// MPS log files the control daemon and its server write into
// CUDA_MPS_LOG_DIRECTORY (the plugin's mps.log_dir).
var mpsLogFiles = []string{"control.log", "server.log"}

// mpsFatalMarkers are the (lower-case) phrases that make an MPS log line a
// fatal fault: "sticky error" and "devices will be reset" are the server
// log's words in the H100 fault of 2026-11-24, "fatal" the word of
// NVIDIA's MPS error containment. That they catch a fault as it happens is
// NOT YET CHECKED on a GPU (device/README.md, "Real-GPU checks not yet
// run", has the step).
var mpsFatalMarkers = []string{"fatal", "sticky error", "devices will be reset"}

var gpuUUIDPattern = regexp.MustCompile(`GPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}`)

// mpsLogWatcher is the real path's MPS health signal: it tails the MPS
// control daemon's and server's logs and reports each new fatal line. A
// line naming a GPU UUID faults that GPU; any other faults every GPU the
// server serves.
type mpsLogWatcher struct {
	dir  string
	poll time.Duration
}

// WatchMPS tails the log files from their current ends (lines already
// there are history) until ctx is done; a file that appears later is read
// from its start, a truncated one (rotated) again from its start.
func (w *mpsLogWatcher) WatchMPS(ctx context.Context) (<-chan nvml.MPSFault, error) {
	ch := make(chan nvml.MPSFault)
	offsets := make([]int64, len(mpsLogFiles))
	for i, name := range mpsLogFiles {
		if info, err := os.Stat(filepath.Join(w.dir, name)); err == nil {
			offsets[i] = info.Size()
		}
	}
	go func() {
		defer close(ch)
		tick := time.NewTicker(w.poll)
		defer tick.Stop()
		for {
			for i, name := range mpsLogFiles {
				offsets[i] = readNewLines(filepath.Join(w.dir, name), offsets[i], func(line string) bool {
					f, ok := parseMPSLogLine(line)
					if !ok {
						return true
					}
					f.Time = time.Now()
					select {
					case ch <- f:
						return true
					case <-ctx.Done():
						return false
					}
				})
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// parseMPSLogLine reports whether an MPS log line is a fatal fault.
func parseMPSLogLine(line string) (nvml.MPSFault, bool) {
	l := strings.ToLower(line)
	for _, m := range mpsFatalMarkers {
		if strings.Contains(l, m) {
			return nvml.MPSFault{UUID: gpuUUIDPattern.FindString(line), Reason: "MPS log: " + strings.TrimSpace(line)}, true
		}
	}
	return nvml.MPSFault{}, false
}

// readNewLines hands path's complete lines after offset to handle (until
// it returns false) and returns the offset after the last one handed.
func readNewLines(path string, offset int64, handle func(string) bool) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0 // absent: a file that appears later is new from its start
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || info.Size() < offset {
		offset = 0 // rotated or truncated
	}
	if _, err := f.Seek(offset, 0); err != nil {
		return offset
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return offset // a partial last line waits for the next poll
		}
		offset += int64(len(line))
		if !handle(line) {
			return offset
		}
	}
}
