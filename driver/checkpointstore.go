package driver

import (
	"context"
	"fmt"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/s3store"
)

// The driver's checkpoint store: opened from the plugin config (a
// checkpoint_store directory or a store block) on first use, checked when
// the driver fingerprints, and garbage-collected in the background after
// commits.

// checkpointStore opens the store on first use and keeps it; an unreachable
// store is retried on the next call.
func (d *Driver) checkpointStore() (*store.Store, error) {
	config, _ := d.getConfig()
	d.storeLock.Lock()
	defer d.storeLock.Unlock()
	if d.store != nil {
		return d.store, nil
	}
	if config.Store != nil {
		s, err := d.openS3Store(config)
		if err != nil {
			return nil, err
		}
		d.store = s
		return s, nil
	}
	if config.CheckpointStore == "" {
		return nil, errNoStore
	}
	s, err := store.Open(config.CheckpointStore, storeOptions(config, d.logger))
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store %s: %w", config.CheckpointStore, err)
	}
	d.store = s
	return s, nil
}

func storeOptions(config *Config, logger hclog.Logger) store.Options {
	return store.Options{
		Retain:    config.CheckpointRetain,
		ChunkSize: config.CheckpointChunkSize,
		Logger:    logger,
	}
}

// openS3Store opens the store block's bucket, checking the endpoint, the
// bucket and the credentials (s3store.New).
func (d *Driver) openS3Store(config *Config) (*store.Store, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	b, err := s3store.New(ctx, config.Store.s3Config())
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	s, err := objectstore.Open(b, storeOptions(config, d.logger))
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store %s: %w", b, err)
	}
	d.logger.Info("checkpoint store opened", "store", b.String())
	return s, nil
}

// gcLoop sweeps unreferenced chunks every interval, if anything was
// committed since the last sweep.
func (d *Driver) gcLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var pending *store.Key
	for {
		select {
		case <-d.ctx.Done():
			return
		case k := <-d.gcKeys:
			pending = &k
		case <-t.C:
			if pending == nil {
				continue
			}
			st, err := d.checkpointStore()
			if err == nil {
				err = st.GC(*pending)
			}
			if err != nil {
				d.logger.Warn("checkpoint store garbage collection failed", "error", err)
				continue
			}
			pending = nil
		}
	}
}

func (d *Driver) noteCommit(k store.Key) {
	select {
	case d.gcKeys <- k:
	default:
	}
}

// storeHealth opens the store if it is not open yet and checks it is still
// reachable (Ping: an unmounted share, a deleted bucket); nil when healthy.
func (d *Driver) storeHealth() error {
	st, err := d.checkpointStore()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	return st.Ping(ctx)
}
