// Command s3fault runs internal/s3fault's proxy in front of an S3 server,
// with its control endpoint on a second address. TEST ONLY:
// scripts/cluster.sh starts it on loopback in front of the local cluster's
// SeaweedFS when CARAVAN_S3_FAULT_PROXY=1, so e2e tests can make the
// server answer 503 SlowDown or reset an upload midway. With no fault set
// every request passes through unchanged.
//
//	s3fault -listen 127.0.0.1:15617 -control 127.0.0.1:15618 -target http://127.0.0.1:15616
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/internal/s3fault"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("s3fault", flag.ContinueOnError)
	listen := fs.String("listen", "", "address of the proxy (loopback)")
	control := fs.String("control", "", "address of the control endpoint (loopback)")
	target := fs.String("target", "", "URL of the S3 server (http://host:port)")
	level := fs.String("log-level", "info", "log level")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "s3fault", Level: hclog.LevelFromString(*level)})
	u, err := checkFlags(*listen, *control, *target)
	if err != nil {
		logger.Error("bad flags", "error", err)
		return 2
	}
	p := s3fault.New(u, logger)
	servers := []*http.Server{
		{Addr: *listen, Handler: p, ReadHeaderTimeout: time.Minute},
		{Addr: *control, Handler: p.Control(), ReadHeaderTimeout: 10 * time.Second},
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			logger.Error("listening", "address", s.Addr, "error", err)
			return 1
		}
		go func() { errs <- s.Serve(ln) }()
	}
	logger.Info("proxy up", "listen", *listen, "control", *control, "target", u.String())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case err := <-errs:
		logger.Error("serving", "error", err)
		return 1
	}
	p.Clear() // no request stays held
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			logger.Warn("shutting down", "address", s.Addr, "error", err)
		}
	}
	return 0
}

// checkFlags refuses anything but loopback addresses: the control
// endpoint has no authentication.
func checkFlags(listen, control, target string) (*url.URL, error) {
	for name, addr := range map[string]string{"listen": listen, "control": control} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("-%s: %q is not host:port: %w", name, addr, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("-%s: %q is not a loopback address", name, addr)
		}
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || !strings.HasPrefix(u.Scheme, "http") {
		return nil, fmt.Errorf("-target: %q is not an http(s) URL", target)
	}
	return u, nil
}
