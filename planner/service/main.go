// Package service is the live planner: it watches Nomad (source), takes
// progress reports from tasks (progress), decides (manager, with
// planner/policy and planner/model), submits job updates (submit), classifies
// failures (failures), registers in Consul and elects a leader (consul), and
// serves a JSON API (httpapi). Main wires them; agent.go runs them.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/planner/service/config"
)

// Main runs `caravan planner [-config planner.hcl] [flags]` (the binary's
// command table, main.go, runs `caravan planner`'s other commands). SIGHUP
// reloads the config files; SIGINT and SIGTERM stop cleanly.
func Main(args []string) int {
	flags, err := config.ParseFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, cli.ErrUsage) {
			return cli.Report(os.Stderr, "caravan planner", err)
		}
		return cli.ExitUsage // the flag package printed it
	}
	cfg, err := config.Load(flags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "caravan planner:", err)
		return 1
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "planner", Level: hclog.LevelFromString(cfg.LogLevel), Output: os.Stderr})

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	a, err := NewAgent(cfg, log, nil)
	if err != nil {
		log.Error("cannot start", "error", err)
		return 1
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = reload(flags, a.Reload, log)
			}
		}
	}()
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("planner stopped", "error", err)
		return 1
	}
	log.Info("planner stopped")
	return 0
}

// reload loads the config files again (SIGHUP) and applies them; a config
// that fails to load (a bad queue, say) is logged and returned, and the
// running one is kept.
func reload(flags *config.Flags, apply func(*config.Config), log hclog.Logger) error {
	next, err := config.Load(flags)
	if err != nil {
		log.Error("reload failed; keeping the running config", "error", err)
		return err
	}
	apply(next)
	return nil
}
