package trainer

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Locator finds the coordinating parameter server. Workers and shard
// servers ask it again whenever their connection to the coordinator ends.
type Locator interface {
	Coordinator(ctx context.Context) (string, error)
}

// StaticLocator is a fixed coordinator address (tests, manual runs).
type StaticLocator string

func (s StaticLocator) Coordinator(context.Context) (string, error) { return string(s), nil }

// FileLocator reads the coordinator's address from a file that Nomad's
// template renders from native service discovery (nomadService), one
// "ADDRESS:PORT TAG,TAG..." line per parameter server; the coordinator is
// the line carrying Tag (e.g. "index-0"). The file is re-read on every
// call, so a re-rendered file (a migrated coordinator) is picked up;
// Coordinator polls until such a line exists or ctx ends.
type FileLocator struct {
	Path string
	Tag  string
	// Poll is the interval between reads while no coordinator is listed.
	Poll time.Duration
}

func (f FileLocator) Coordinator(ctx context.Context) (string, error) {
	poll := f.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	for {
		addr, err := f.read()
		if err == nil && addr != "" {
			return addr, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no coordinator (tag %q) in %s: %w", f.Tag, f.Path, ctx.Err())
		case <-time.After(poll):
		}
	}
}

func (f FileLocator) read() (string, error) {
	file, err := os.Open(f.Path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		for _, tag := range strings.Split(fields[1], ",") {
			if tag == f.Tag {
				return fields[0], nil
			}
		}
	}
	return "", sc.Err()
}
