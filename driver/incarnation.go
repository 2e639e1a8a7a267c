package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/store"
)

const (
	// incarnationTimeout bounds the whole lookup of a job's incarnation.
	incarnationTimeout = 15 * time.Second
	// incarnationAttempts is how often the lookup is tried within it.
	incarnationAttempts = 3
	// allocIncarnationPrefix marks the fallback incarnation bound to one
	// allocation (on_restore_error = "start_fresh" without the Nomad API).
	allocIncarnationPrefix = "alloc-"
)

// errNoIncarnation means the job's incarnation could not be learnt.
var errNoIncarnation = errors.New("job incarnation unknown")

// checkpointIdentity works out the store key of a checkpointing task. An
// explicit checkpoint.key needs nothing else. Otherwise the key is bound to
// the job's incarnation, its Nomad create index, read from the local agent's
// API: a job purged and submitted again gets a new one and starts fresh.
// When the API cannot tell, the task fails (Nomad's restart policy retries)
// unless it chose on_restore_error = "start_fresh": then its checkpoints are
// bound to its allocation, which only restarts of that allocation find.
// Both cases emit an event.
func (d *Driver) checkpointIdentity(cfg *drivers.TaskConfig, cc *CheckpointConfig, events *taskEmitter) (store.Key, error) {
	if cc.Key != "" {
		return checkpointKey(cfg, cc, "")
	}
	ctx, cancel := context.WithTimeout(d.ctx, incarnationTimeout)
	defer cancel()
	inc, err := d.jobIncarnation(ctx, cfg)
	if err == nil {
		return checkpointKey(cfg, cc, inc)
	}
	err = fmt.Errorf("%w: %w", errNoIncarnation, err)
	if cc.OnRestoreError != OnRestoreErrorStartFresh {
		events.emit(map[string]string{annotationReason: "identity"},
			"Checkpoint identity unknown, not starting: %v", err)
		return store.Key{}, fmt.Errorf("checkpoint key: %w (set the plugin's nomad_address and nomad_token_file, "+
			"or checkpoint.key to name the checkpoints, or checkpoint.on_restore_error = %q)", err, OnRestoreErrorStartFresh)
	}
	key, kerr := checkpointKey(cfg, cc, allocIncarnationPrefix+cfg.AllocID)
	if kerr != nil {
		return store.Key{}, kerr
	}
	events.emit(map[string]string{annotationReason: "identity"},
		"Checkpoint identity unknown (on_restore_error = %q): %v; this allocation's checkpoints go to %s",
		OnRestoreErrorStartFresh, err, key)
	return key, nil
}

// jobIncarnation returns the create index of the task's job, as the
// allocation the task belongs to records it, retrying briefly.
func (d *Driver) jobIncarnation(ctx context.Context, cfg *drivers.TaskConfig) (string, error) {
	client, err := d.nomadClient()
	if err != nil {
		return "", err
	}
	q := (&api.QueryOptions{Namespace: taskNamespace(cfg)}).WithContext(ctx)
	var lastErr error
	for attempt := range incarnationAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("%w (last: %w)", ctx.Err(), lastErr)
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		alloc, _, err := client.Allocations().Info(cfg.AllocID, q)
		if err != nil {
			lastErr = fmt.Errorf("read allocation %s from Nomad at %s: %w", cfg.AllocID, client.Address(), err)
			d.logger.Warn("job incarnation lookup failed", "alloc_id", cfg.AllocID, "attempt", attempt+1, "error", err)
			continue
		}
		if alloc.Job == nil || alloc.Job.CreateIndex == nil || *alloc.Job.CreateIndex == 0 {
			return "", fmt.Errorf("allocation %s from Nomad at %s carries no job create index", cfg.AllocID, client.Address())
		}
		if alloc.JobID != cfg.JobID {
			return "", fmt.Errorf("allocation %s belongs to job %q, not %q", cfg.AllocID, alloc.JobID, cfg.JobID)
		}
		return strconv.FormatUint(*alloc.Job.CreateIndex, 10), nil
	}
	return "", lastErr
}

// nomadClient builds a client of the local agent's HTTP API from the
// plugin config over Nomad's usual environment (NOMAD_ADDR, NOMAD_TOKEN,
// NOMAD_CACERT, ...), which the plugin inherits from the client agent.
func (d *Driver) nomadClient() (*api.Client, error) {
	config, _ := d.getConfig()
	c := api.DefaultConfig()
	c.Namespace = "" // per query
	if config.NomadAddress != "" {
		c.Address = config.NomadAddress
	}
	switch {
	case config.NomadToken != "":
		c.SecretID = config.NomadToken
	case config.NomadTokenFile != "":
		b, err := os.ReadFile(config.NomadTokenFile)
		if err != nil {
			return nil, fmt.Errorf("nomad_token_file: %w", err)
		}
		c.SecretID = strings.TrimSpace(string(b))
	}
	client, err := api.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("nomad API client for %s: %w", c.Address, err)
	}
	return client, nil
}

func taskNamespace(cfg *drivers.TaskConfig) string {
	switch {
	case cfg.Namespace != "":
		return cfg.Namespace
	case cfg.Env["NOMAD_NAMESPACE"] != "":
		return cfg.Env["NOMAD_NAMESPACE"]
	}
	return "default"
}
