package relay

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// follower reads lines from a log file as it grows. Given a path P that
// does not exist while P.0, P.1, ... do (Nomad's rotated task logs,
// alloc/logs/<task>.stdout.N), it follows the highest-numbered one and moves
// on when a newer one appears.
type follower struct {
	path  string
	clk   Clock
	poll  time.Duration
	file  *os.File
	cur   string
	rd    *bufio.Reader
	carry string // a partial last line
}

// current returns the file to read: the path itself, or its newest rotation.
func (f *follower) current() (string, bool) {
	if _, err := os.Stat(f.path); err == nil {
		return f.path, true
	}
	matches, _ := filepath.Glob(f.path + ".*")
	best, bestN := "", -1
	for _, m := range matches {
		n, err := strconv.Atoi(strings.TrimPrefix(m, f.path+"."))
		if err == nil && n > bestN {
			best, bestN = m, n
		}
	}
	return best, bestN >= 0
}

// Next returns the next complete line, waiting for one (or ctx).
func (f *follower) Next(ctx context.Context) (string, error) {
	for {
		if f.file == nil {
			name, ok := f.current()
			if !ok {
				if err := f.wait(ctx); err != nil {
					return "", err
				}
				continue
			}
			fh, err := os.Open(name)
			if err != nil {
				if err := f.wait(ctx); err != nil {
					return "", err
				}
				continue
			}
			f.file, f.cur, f.rd = fh, name, bufio.NewReader(fh)
		}
		chunk, err := f.rd.ReadString('\n')
		if err == nil {
			line := f.carry + strings.TrimRight(chunk, "\r\n")
			f.carry = ""
			return line, nil
		}
		if !errors.Is(err, io.EOF) {
			return "", err
		}
		f.carry += chunk
		// At the end: a newer rotation means this file is finished.
		if name, ok := f.current(); ok && name != f.cur {
			f.file.Close()
			f.file = nil
			if f.carry != "" {
				line := f.carry
				f.carry = ""
				return line, nil
			}
			continue
		}
		if err := f.wait(ctx); err != nil {
			return "", err
		}
	}
}

func (f *follower) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-f.clk.After(f.poll):
		return nil
	}
}

func (f *follower) Close() {
	if f.file != nil {
		f.file.Close()
	}
}
