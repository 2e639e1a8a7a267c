// Command ctradversary is the program of the caravan-adversary test image
// (FROM scratch, scripts/build-images.sh): run as a docker task beside
// caravan's checkpoint role tasks, it plants one attack in the shared
// checkpoint directory, prints "planted", and waits for its kill signal.
// The caravan tasks (host root) must not reach outside the checkpoint
// through it (e2e/adversarial container_test.go).
//
//	ctradversary CASE SENTINEL [DIR]
//
// SENTINEL is a host path (invisible in the container) that links point at;
// DIR defaults to /alloc/checkpoint.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

const marker = "caravan-checkpoint.json"

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: ctradversary CASE SENTINEL [DIR]")
		os.Exit(2)
	}
	name, sentinel, dir := os.Args[1], os.Args[2], "/alloc/checkpoint"
	if len(os.Args) > 3 {
		dir = os.Args[3]
	}
	if err := plant(name, sentinel, dir); err != nil {
		fmt.Fprintf(os.Stderr, "ctradversary: %s: %v\n", name, err)
		os.Exit(1)
	}
	fmt.Println("planted", name)
	if name == "ignore" {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		for { // until SIGKILL at kill_timeout (a bare select{} is a deadlock to Go)
			time.Sleep(time.Hour)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

func plant(name, sentinel, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	honest := func() error {
		return os.WriteFile(filepath.Join(dir, marker), []byte(`{"sequence": 1, "step": 1}`), 0o644)
	}
	in := func(n string) string { return filepath.Join(dir, n) }
	switch name {
	case "symlink-out": // a checkpoint file linking to a host file
		if err := os.Symlink(filepath.Join(sentinel, "host-secret"), in("state.bin")); err != nil {
			return err
		}
		return honest()
	case "symlink-marker":
		return os.Symlink(filepath.Join(sentinel, "host-secret"), in(marker))
	case "fifo":
		if err := syscall.Mkfifo(in("pipe"), 0o644); err != nil {
			return err
		}
		return honest()
	case "fifo-marker":
		return syscall.Mkfifo(in(marker), 0o644)
	case "huge-marker":
		f, err := os.Create(in(marker))
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Truncate(256 << 20)
	case "dir-symlink": // the checkpoint directory itself, to a host directory
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		return os.Symlink(sentinel, dir)
	case "hardlink": // a hard link to a file outside the checkpoint
		out := filepath.Join(filepath.Dir(dir), "outside-data")
		if err := os.WriteFile(out, []byte("alloc data"), 0o644); err != nil {
			return err
		}
		if err := os.Link(out, in("state.bin")); err != nil {
			return err
		}
		return honest()
	case "ignore": // one honest checkpoint, then deaf to requests and SIGTERM
		if err := os.WriteFile(in("state.bin"), []byte("honest"), 0o644); err != nil {
			return err
		}
		return honest()
	case "request-symlink": // the sidecar's request file, to a host file
		return os.Symlink(filepath.Join(sentinel, "host-secret"), in("caravan-checkpoint-request.json"))
	}
	return fmt.Errorf("unknown case")
}
