// Package driver is caravan's checkpointing Nomad task driver: it runs
// processes through Nomad's shared executor, like raw_exec, and adds a
// checkpoint protocol (see README.md and driver/protocol) so a training task
// survives suspend (scale to 0), resume, migration and node drains.
package driver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/consul-template/signals"
	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/drivers/shared/eventer"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/internal/metrics"
	"github.com/caravan-nomad/caravan/internal/version"
)

const (
	// PluginName is the name jobspecs use in `driver = "..."`; it must equal
	// the plugin's file name in the client's plugin_dir.
	PluginName = "caravan"

	// fingerprintPeriod is the interval between fingerprints.
	fingerprintPeriod = 30 * time.Second

	// commitTimeout bounds one commit to the store.
	commitTimeout = 15 * time.Minute
)

var (
	// pluginInfo is the response returned for the PluginInfo RPC.
	pluginInfo = &base.PluginInfoResponse{
		Type:              base.PluginTypeDriver,
		PluginApiVersions: []string{drivers.ApiVersion010},
		PluginVersion:     version.Version,
		Name:              PluginName,
	}

	// configSpec is the plugin configuration schema.
	configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
		"enabled": hclspec.NewDefault(
			hclspec.NewAttr("enabled", "bool", false),
			hclspec.NewLiteral("false"),
		),
		"denied_host_uids": hclspec.NewAttr("denied_host_uids", "string", false),
		"denied_host_gids": hclspec.NewAttr("denied_host_gids", "string", false),
		"checkpoint_store": hclspec.NewAttr("checkpoint_store", "string", false),
		"store": hclspec.NewBlock("store", false, hclspec.NewObject(map[string]*hclspec.Spec{
			"endpoint":         hclspec.NewAttr("endpoint", "string", true),
			"bucket":           hclspec.NewAttr("bucket", "string", true),
			"prefix":           hclspec.NewAttr("prefix", "string", false),
			"region":           hclspec.NewAttr("region", "string", false),
			"tls":              hclspec.NewDefault(hclspec.NewAttr("tls", "bool", false), hclspec.NewLiteral("true")),
			"ca_cert":          hclspec.NewAttr("ca_cert", "string", false),
			"path_style":       hclspec.NewDefault(hclspec.NewAttr("path_style", "bool", false), hclspec.NewLiteral("false")),
			"credentials_file": hclspec.NewAttr("credentials_file", "string", false),
		})),
		"checkpoint_retain": hclspec.NewDefault(
			hclspec.NewAttr("checkpoint_retain", "number", false),
			hclspec.NewLiteral("3"),
		),
		"checkpoint_chunk_size": hclspec.NewDefault(
			hclspec.NewAttr("checkpoint_chunk_size", "number", false),
			hclspec.NewLiteral("0"),
		),
		"checkpoint_gc_interval": hclspec.NewDefault(
			hclspec.NewAttr("checkpoint_gc_interval", "string", false),
			hclspec.NewLiteral(strconv.Quote(defaultGCInterval)),
		),
		"nomad_address":    hclspec.NewAttr("nomad_address", "string", false),
		"nomad_token":      hclspec.NewAttr("nomad_token", "string", false),
		"nomad_token_file": hclspec.NewAttr("nomad_token_file", "string", false),
		"metrics_address":  hclspec.NewAttr("metrics_address", "string", false),
		"docker_endpoint":  hclspec.NewAttr("docker_endpoint", "string", false),
		"podman_endpoint":  hclspec.NewAttr("podman_endpoint", "string", false),
	})

	// taskConfigSpec is the schema of a task's config block.
	taskConfigSpec = hclspec.NewObject(map[string]*hclspec.Spec{
		"command":            hclspec.NewAttr("command", "string", false),
		"args":               hclspec.NewAttr("args", "list(string)", false),
		"work_dir":           hclspec.NewAttr("work_dir", "string", false),
		"oom_score_adj":      hclspec.NewAttr("oom_score_adj", "number", false),
		"cgroup_v2_override": hclspec.NewAttr("cgroup_v2_override", "string", false),
		"cgroup_v1_override": hclspec.NewAttr("cgroup_v1_override", "list(map(string))", false),
		"checkpoint": hclspec.NewBlock("checkpoint", false, hclspec.NewObject(map[string]*hclspec.Spec{
			"signal": hclspec.NewDefault(
				hclspec.NewAttr("signal", "string", false),
				hclspec.NewLiteral(`"SIGUSR1"`),
			),
			"interval": hclspec.NewAttr("interval", "string", false),
			"timeout": hclspec.NewDefault(
				hclspec.NewAttr("timeout", "string", false),
				hclspec.NewLiteral(`"5m"`),
			),
			"on_restore_error": hclspec.NewDefault(
				hclspec.NewAttr("on_restore_error", "string", false),
				hclspec.NewLiteral(`"fail"`),
			),
			"scope": hclspec.NewDefault(
				hclspec.NewAttr("scope", "string", false),
				hclspec.NewLiteral(`"alloc"`),
			),
			"key":          hclspec.NewAttr("key", "string", false),
			"role":         hclspec.NewAttr("role", "string", false),
			"task":         hclspec.NewAttr("task", "string", false),
			"dir":          hclspec.NewAttr("dir", "string", false),
			"wait_timeout": hclspec.NewAttr("wait_timeout", "string", false),
		})),
	})

	// capabilities: the same as raw_exec. No filesystem isolation, no
	// volume mounts (Nomad refuses jobs that ask for them).
	capabilities = &drivers.Capabilities{
		SendSignals: true,
		Exec:        true,
		FSIsolation: drivers.FSIsolationNone,
		NetIsolationModes: []drivers.NetIsolationMode{
			drivers.NetIsolationModeHost,
			drivers.NetIsolationModeGroup,
		},
		MountConfigs: drivers.MountConfigSupportNone,
	}

	errNoStore = errors.New("the caravan plugin has no checkpoint_store configured")

	// errDisabled refuses tasks while the plugin block leaves the driver off.
	errDisabled = errors.New(`the caravan driver is disabled on this client: set enabled = true in its plugin "caravan" config block`)
)

// Driver is the caravan task driver.
type Driver struct {
	// eventer multiplexes task events to every TaskEvents caller.
	eventer *eventer.Eventer

	// configLock guards config and nomadConfig.
	configLock  sync.RWMutex
	config      *Config
	nomadConfig *base.ClientDriverConfig

	// storeLock guards the lazily opened checkpoint store.
	storeLock sync.Mutex
	store     *store.Store

	// gcKeys receives keys with new commits, for the GC loop.
	gcKeys chan store.Key
	gcOnce sync.Once

	// jobs reads a task's job from Nomad (nil: no check); built once.
	jobsOnce sync.Once
	jobs     jobReader

	tasks  *taskStore
	ctx    context.Context
	logger hclog.Logger

	// metrics are served at the config's metrics_address, if set.
	metrics       *driverMetrics
	metricsLock   sync.Mutex
	metricsServer *metrics.Server
	metricsAddr   string
}

// jobReader returns the Nomad API reader for policy checks, or nil.
func (d *Driver) jobReader() jobReader {
	d.jobsOnce.Do(func() {
		client, err := d.nomadClient()
		if err != nil {
			d.logger.Warn("no Nomad API client; reschedule policies are not checked", "error", err)
			return
		}
		d.jobs = client.Jobs()
	})
	return d.jobs
}

// NewDriver returns the driver.
func NewDriver(ctx context.Context, logger hclog.Logger) *Driver {
	logger = logger.Named(PluginName)
	return &Driver{
		eventer: eventer.NewEventer(ctx, logger),
		config:  &Config{CheckpointRetain: store.DefaultRetain, CheckpointGCInterval: defaultGCInterval},
		gcKeys:  make(chan store.Key, 1),
		tasks:   newTaskStore(),
		ctx:     ctx,
		logger:  logger,
		metrics: newDriverMetrics(),
	}
}

func (d *Driver) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }
func (d *Driver) ConfigSchema() (*hclspec.Spec, error)          { return configSpec, nil }
func (d *Driver) TaskConfigSchema() (*hclspec.Spec, error)      { return taskConfigSpec, nil }
func (d *Driver) Capabilities() (*drivers.Capabilities, error)  { return capabilities, nil }

func (d *Driver) SetConfig(cfg *base.Config) error {
	config := Config{CheckpointRetain: store.DefaultRetain, CheckpointGCInterval: defaultGCInterval}
	if len(cfg.PluginConfig) != 0 {
		if err := base.MsgPackDecode(cfg.PluginConfig, &config); err != nil {
			return err
		}
	}
	if err := config.validate(); err != nil {
		return fmt.Errorf("invalid caravan plugin config: %w", err)
	}

	d.configLock.Lock()
	d.config = &config
	if cfg.AgentConfig != nil {
		d.nomadConfig = cfg.AgentConfig.Driver
	}
	d.configLock.Unlock()

	if !config.Enabled {
		d.logger.Info("driver disabled: set enabled = true in the plugin block to run tasks")
	}

	// An S3 store is opened now, so a bad endpoint, a missing bucket or
	// refused credentials fail the plugin's start, naming the field, rather
	// than the first checkpoint. A directory store opens on first use.
	var opened *store.Store
	if config.Enabled && config.Store != nil {
		s, err := d.openS3Store(&config)
		if err != nil {
			return fmt.Errorf("invalid caravan plugin config: %w", err)
		}
		opened = s
	}
	d.storeLock.Lock()
	d.store = opened // a directory store is reopened with the new options on next use
	d.storeLock.Unlock()

	if err := d.serveMetrics(config.MetricsAddress); err != nil {
		return fmt.Errorf("invalid caravan plugin config: %w", err)
	}
	if config.gcInterval > 0 {
		d.gcOnce.Do(func() { go d.gcLoop(config.gcInterval) })
	}
	return nil
}

func (d *Driver) getConfig() (*Config, *base.ClientDriverConfig) {
	d.configLock.RLock()
	defer d.configLock.RUnlock()
	return d.config, d.nomadConfig
}

func (d *Driver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	ch := make(chan *drivers.Fingerprint)
	go d.handleFingerprint(ctx, ch)
	return ch, nil
}

func (d *Driver) handleFingerprint(ctx context.Context, ch chan<- *drivers.Fingerprint) {
	defer close(ch)
	ticker := time.NewTimer(0)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.ctx.Done():
			return
		case <-ticker.C:
			ticker.Reset(fingerprintPeriod)
			select {
			case ch <- d.buildFingerprint():
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			}
		}
	}
}

// buildFingerprint reports the driver healthy (tasks without checkpoints run
// regardless) and whether the checkpoint store is reachable, as the
// attribute driver.caravan.checkpoint_store jobs can constrain on.
func (d *Driver) buildFingerprint() *drivers.Fingerprint {
	if config, _ := d.getConfig(); config == nil || !config.Enabled {
		return &drivers.Fingerprint{Health: drivers.HealthStateUndetected, HealthDescription: "disabled"}
	}
	attrs := map[string]*pstructs.Attribute{
		"driver.caravan":         pstructs.NewBoolAttribute(true),
		"driver.caravan.version": pstructs.NewStringAttribute(version.Version),
	}
	desc := drivers.DriverHealthy
	if err := d.storeHealth(); err != nil {
		attrs["driver.caravan.checkpoint_store"] = pstructs.NewBoolAttribute(false)
		desc = fmt.Sprintf("%s (checkpoints unavailable: %v)", drivers.DriverHealthy, err)
	} else {
		attrs["driver.caravan.checkpoint_store"] = pstructs.NewBoolAttribute(true)
	}
	return &drivers.Fingerprint{Attributes: attrs, Health: drivers.HealthStateHealthy, HealthDescription: desc}
}

func (d *Driver) RecoverTask(handle *drivers.TaskHandle) error {
	if handle == nil {
		return errors.New("handle cannot be nil")
	}
	if handle.Config == nil {
		return errors.New("handle has no task config")
	}
	// Already attached (a second RecoverTask for the same task): nothing to do.
	if _, ok := d.tasks.Get(handle.Config.ID); ok {
		d.logger.Trace("nothing to recover; task already exists", "task_id", handle.Config.ID)
		return nil
	}
	taskState, err := recoveredState(handle)
	if err != nil {
		return err
	}
	if tc := taskState.DriverConfig; tc.Checkpoint != nil && tc.Checkpoint.Role != "" {
		return d.recoverRoleTask(taskState)
	}
	plugRC, err := pstructs.ReattachConfigToGoPlugin(taskState.ReattachConfig)
	if err != nil {
		return fmt.Errorf("failed to build ReattachConfig from task state: %w", err)
	}
	logger := d.logger.With("task_name", handle.Config.Name, "alloc_id", handle.Config.AllocID)
	exec, pluginClient, err := executor.ReattachToExecutor(plugRC, logger)
	if err != nil {
		return fmt.Errorf("failed to reattach to executor: %w", err)
	}

	h := &taskHandle{
		exec:         exec,
		pid:          taskState.Pid,
		pluginClient: pluginClient,
		taskConfig:   taskState.TaskConfig,
		procState:    drivers.TaskStateRunning,
		startedAt:    taskState.StartedAt,
		exitResult:   &drivers.ExitResult{},
		logger:       logger,
		events:       newTaskEmitter(d.eventer, taskState.TaskConfig),
		doneCh:       make(chan struct{}),
	}
	if taskState.Checkpoint != nil {
		if err := d.recoverCheckpointer(h, taskState, handle.Config.AllocID, logger); err != nil {
			return err
		}
	}

	d.tasks.Set(taskState.TaskConfig.ID, h)
	go h.run()
	if h.ckpt != nil {
		d.commitOnRecover(h)
		go h.ckpt.periodic(d.ctx)
	}
	return nil
}

// recoveredState decodes and checks the driver state a handle carries.
func recoveredState(handle *drivers.TaskHandle) (*TaskState, error) {
	if handle.Version != taskHandleVersion {
		return nil, fmt.Errorf("cannot recover task %s: handle version %d, this driver understands %d",
			handle.Config.ID, handle.Version, taskHandleVersion)
	}
	var taskState TaskState
	if err := handle.GetDriverState(&taskState); err != nil {
		return nil, fmt.Errorf("failed to decode task state from handle: %w", err)
	}
	if taskState.TaskConfig == nil || taskState.DriverConfig == nil {
		return nil, errors.New("task state is missing its task config")
	}
	return &taskState, nil
}

// recoverCheckpointer gives a recovered task its checkpointer back, with
// the newest generation and sequence the store holds for it.
func (d *Driver) recoverCheckpointer(h *taskHandle, taskState *TaskState, allocID string, logger hclog.Logger) error {
	cs, tc := taskState.Checkpoint, taskState.DriverConfig
	if tc.Checkpoint == nil {
		return errors.New("task state has checkpoint state but no checkpoint config")
	}
	if err := tc.Checkpoint.validate(); err != nil { // restores parsed durations
		return err
	}
	h.ckpt = d.newCheckpointer(taskState.TaskConfig, tc.Checkpoint, cs, h, logger)
	// The last sequence committed may be newer than the one restored at
	// start: ask the store. Only this allocation's own commits count:
	// with scope "group" another member's sequence says nothing about
	// the markers this task writes.
	h.ckpt.lastSeq.Store(cs.RestoredSequence)
	h.ckpt.lastGen.Store(cs.RestoredGeneration)
	if st, err := d.checkpointStore(); err == nil {
		if m, err := st.Latest(cs.Key); err == nil {
			h.ckpt.lastGen.Store(max(cs.RestoredGeneration, m.Generation))
			if seq, ok := parseSeq(m.Meta); ok && seq > cs.RestoredSequence && m.Meta[metaAllocID] == allocID {
				h.ckpt.lastSeq.Store(seq)
			}
		}
	}
	return nil
}

// commitOnRecover commits, in the background, a checkpoint the task
// completed while the plugin was down (or whose commit the plugin's death
// interrupted). The task does not touch the directory until the next
// signal, which waits for this.
func (d *Driver) commitOnRecover(h *taskHandle) {
	if !h.ckpt.acquire(d.ctx) {
		return
	}
	h.ckpt.recovering.Store(true)
	go func() {
		// Cleared after the release: a request that finds the slot held
		// meanwhile waits rather than being folded and lost.
		defer h.ckpt.recovering.Store(false)
		defer h.ckpt.release()
		ctx, cancel := context.WithTimeout(d.ctx, commitTimeout)
		defer cancel()
		_ = h.ckpt.commitIfNew(ctx, reasonRecover)
	}()
}

func (d *Driver) buildEnvList(cfg *drivers.TaskConfig, extra map[string]string) []string {
	env := make([]string, 0, len(cfg.Env)+len(extra))
	for k, v := range cfg.Env {
		if _, ok := extra[k]; !ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

func (d *Driver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	tc, nomadConfig, err := d.admitTask(cfg)
	if err != nil {
		return nil, nil, err
	}
	logger := d.logger.With("task_name", cfg.Name, "alloc_id", cfg.AllocID)
	events := newTaskEmitter(d.eventer, cfg)
	if tc.Checkpoint != nil && tc.Checkpoint.Role != "" {
		return d.startRoleTask(cfg, tc, events, logger)
	}

	// Restore before the process starts, so it finds its checkpoint.
	var ckptState *CheckpointState
	var ckptEnv map[string]string
	if tc.Checkpoint != nil {
		r, err := d.restoreForStart(cfg, tc, events)
		if err != nil {
			return nil, nil, err
		}
		ckptState, ckptEnv = &r.state, r.env
	}

	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	h, err := d.launchTask(cfg, tc, nomadConfig, ckptEnv, logger)
	if err != nil {
		return nil, nil, err
	}
	h.events = events
	if ckptState != nil {
		h.ckpt = d.newCheckpointer(cfg, tc.Checkpoint, ckptState, h, logger)
		h.ckpt.lastSeq.Store(ckptState.RestoredSequence)
		h.ckpt.lastGen.Store(ckptState.RestoredGeneration)
	}

	driverState := TaskState{
		ReattachConfig: pstructs.ReattachConfigFromGoPlugin(h.pluginClient.ReattachConfig()),
		Pid:            h.pid,
		TaskConfig:     cfg,
		DriverConfig:   tc,
		StartedAt:      h.startedAt,
		Checkpoint:     ckptState,
	}
	if err := handle.SetDriverState(&driverState); err != nil {
		_ = h.exec.Shutdown("", 0)
		h.pluginClient.Kill()
		return nil, nil, fmt.Errorf("failed to set driver state: %w", err)
	}

	d.tasks.Set(cfg.ID, h)
	go h.run()
	if h.ckpt != nil {
		go h.ckpt.periodic(d.ctx)
		go checkReschedulePolicy(d.ctx, d.jobReader(), cfg, events, logger)
	}
	logger.Info("task started", "pid", h.pid, "checkpoints", h.ckpt != nil)
	return handle, nil, nil
}

// admitTask decodes and checks a task's configuration against the
// driver's: the checks StartTask makes before it touches anything.
func (d *Driver) admitTask(cfg *drivers.TaskConfig) (*TaskConfig, *base.ClientDriverConfig, error) {
	if _, ok := d.tasks.Get(cfg.ID); ok {
		return nil, nil, fmt.Errorf("task with ID %q already started", cfg.ID)
	}
	var tc TaskConfig
	if err := cfg.DecodeDriverConfig(&tc); err != nil {
		return nil, nil, fmt.Errorf("failed to decode driver config: %w", err)
	}
	if err := tc.validate(); err != nil {
		return nil, nil, fmt.Errorf("invalid caravan task config: %w", err)
	}
	config, nomadConfig := d.getConfig()
	if nomadConfig == nil {
		return nil, nil, errors.New("driver has no agent configuration yet (SetConfig not called)")
	}
	if !config.Enabled {
		return nil, nil, errDisabled
	}
	if err := config.checkHostIDs(cfg.User); err != nil {
		return nil, nil, fmt.Errorf("task refused: %w", err)
	}
	if err := checkMounts(cfg.Mounts); err != nil {
		return nil, nil, err
	}
	return &tc, nomadConfig, nil
}

// restoreForStart restores the newest checkpoint of a task with a
// checkpoint block into its directory, before its process starts.
func (d *Driver) restoreForStart(cfg *drivers.TaskConfig, tc *TaskConfig, events *taskEmitter) (*restored, error) {
	if _, err := d.checkpointStore(); errors.Is(err, errNoStore) {
		return nil, fmt.Errorf("task has a checkpoint block but %w (plugin config)", errNoStore)
	}
	key, err := d.checkpointIdentity(cfg, tc.Checkpoint, events)
	if err != nil {
		return nil, err
	}
	return d.prepareCheckpoint(cfg, tc, key, events)
}

// launchTask starts the task's process under a Nomad executor of its own
// and returns its handle (events and checkpointer not yet set).
func (d *Driver) launchTask(cfg *drivers.TaskConfig, tc *TaskConfig, nomadConfig *base.ClientDriverConfig,
	ckptEnv map[string]string, logger hclog.Logger) (*taskHandle, error) {
	executorConfig := &executor.ExecutorConfig{
		LogFile:  filepath.Join(cfg.TaskDir().Dir, "executor.out"),
		LogLevel: "debug",
	}
	exec, pluginClient, err := executor.CreateExecutor(logger, nomadConfig, executorConfig)
	if err != nil {
		return nil, fmt.Errorf("failed to create executor: %w", err)
	}
	launch, err := launchCommand(tc, cfg.TaskDir().Dir)
	if err != nil {
		pluginClient.Kill()
		return nil, err
	}
	execCmd := &executor.ExecCommand{
		Cmd:              launch.cmd,
		Args:             launch.args,
		Env:              d.buildEnvList(cfg, ckptEnv),
		User:             cfg.User,
		TaskDir:          cfg.TaskDir().Dir,
		StdoutPath:       cfg.StdoutPath,
		StderrPath:       cfg.StderrPath,
		NetworkIsolation: cfg.NetworkIsolation,
		Resources:        cfg.Resources.Copy(),
		// The task gets a cgroup of its own (a freezer cgroup on cgroups
		// v1, its scope on v2): every process it starts is stopped with it.
		BasicProcessCgroup: true,
	}
	ps, err := exec.Launch(execCmd)
	if err != nil {
		pluginClient.Kill()
		return nil, fmt.Errorf("failed to launch command with executor: %w", err)
	}
	return &taskHandle{
		exec:         exec,
		pid:          ps.Pid,
		pluginClient: pluginClient,
		taskConfig:   cfg,
		procState:    drivers.TaskStateRunning,
		startedAt:    time.Now().Round(time.Millisecond),
		logger:       logger,
		doneCh:       make(chan struct{}),
	}, nil
}

func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	handle, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	ch := make(chan *drivers.ExitResult)
	go d.handleWait(ctx, handle, ch)
	return ch, nil
}

func (d *Driver) handleWait(ctx context.Context, handle *taskHandle, ch chan *drivers.ExitResult) {
	defer close(ch)
	var result *drivers.ExitResult
	var ps *executor.ProcessState
	var err error
	if handle.exec == nil {
		// A role task: exited already, or a sidecar until StopTask.
		select {
		case <-handle.doneCh:
		case <-ctx.Done():
			return
		}
		result = handle.TaskStatus().ExitResult
	} else {
		ps, err = handle.exec.Wait(ctx)
		if err == nil {
			// run's GPU out-of-memory event goes before the exit.
			select {
			case <-handle.doneCh:
			case <-ctx.Done():
				return
			}
		}
	}
	switch {
	case result != nil:
	case err != nil:
		result = &drivers.ExitResult{Err: fmt.Errorf("executor: error waiting on process: %w", err)}
		if ps == nil {
			result.ExitCode = -1
		}
	default:
		result = &drivers.ExitResult{ExitCode: ps.ExitCode, Signal: ps.Signal}
	}
	select {
	case <-ctx.Done():
	case <-d.ctx.Done():
	case ch <- result:
	}
}

// StopTask checkpoints a checkpointing task before stopping it, all within
// the kill timeout T whatever the task or the I/O does: it sends the
// checkpoint signal and waits for the marker until 4/5 T, commits until
// 9/10 T, then stops the process with the kill signal and the rest of T (at
// least T/10) before SIGKILL. A marker the task writes while exiting
// (SIGTERM-style frameworks) is committed within a further T/10, so StopTask
// returns within 1.1 T (plus a second for a commit stuck in the kernel,
// which is left to finish in the background).
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if h.exec == nil {
		if h.side != nil {
			h.side.shutdown(h, timeout)
		}
		return nil // a restore or commit role task exited in StartTask
	}
	start := time.Now()
	tenth := timeout / 10
	if h.ckpt != nil && h.IsRunning() {
		waitCtx, cancel := context.WithDeadline(d.ctx, start.Add(timeout-2*tenth))
		commitCtx, cancelCommit := context.WithDeadline(d.ctx, start.Add(timeout-tenth))
		if h.ckpt.acquire(waitCtx) {
			_ = h.ckpt.checkpoint(waitCtx, commitCtx, reasonStop)
			h.ckpt.release()
		} else {
			h.ckpt.failed(reasonStop, errors.New("an earlier checkpoint was still in progress at the kill timeout"))
		}
		cancelCommit()
		cancel()
	}

	grace := max(timeout-time.Since(start), tenth)
	select {
	case <-h.doneCh:
		grace = 0 // already exited (e.g. on a SIGTERM-style checkpoint signal)
	default:
	}
	if err := h.exec.Shutdown(signal, grace); err != nil {
		select {
		case <-h.doneCh:
		default:
			if !h.pluginClient.Exited() {
				return fmt.Errorf("executor Shutdown failed: %w", err)
			}
		}
	}
	<-h.doneCh

	if h.ckpt != nil {
		ctx, cancel := context.WithTimeout(d.ctx, max(tenth, time.Second))
		if h.ckpt.acquire(ctx) {
			_ = h.ckpt.commitIfNew(ctx, reasonExit)
			h.ckpt.release()
		}
		cancel()
	}
	h.pluginClient.Kill()
	return nil
}

func (d *Driver) DestroyTask(taskID string, force bool) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if h.IsRunning() && !force {
		return errors.New("cannot destroy running task")
	}
	if h.side != nil {
		h.side.shutdown(h, time.Second)
	}
	if h.exec != nil && !h.pluginClient.Exited() {
		if err := h.exec.Shutdown("", 0); err != nil {
			h.logger.Error("destroying executor failed", "error", err)
		}
		h.pluginClient.Kill()
	}
	d.tasks.Delete(taskID)
	return nil
}

func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h.TaskStatus(), nil
}

func (d *Driver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	if h.side != nil {
		return sidecarStats(ctx, h, interval), nil
	}
	if h.exec == nil {
		return nil, errRoleExited
	}
	return h.exec.Stats(ctx, interval)
}

func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.eventer.TaskEvents(ctx)
}

// SignalTask forwards a signal to the task. The task's checkpoint signal
// (`nomad alloc signal -s SIGUSR1 ALLOC TASK`) takes an on-demand
// checkpoint: the driver signals, waits for the marker and commits in the
// background, and reports the outcome as a task event.
func (d *Driver) SignalTask(taskID string, signal string) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	sig, ok := signals.SignalLookup[signal]
	if !ok {
		return fmt.Errorf("unknown signal %q", signal)
	}
	if h.side != nil {
		return h.side.signal(d.ctx, h, signal)
	}
	if h.exec == nil {
		return errRoleExited
	}
	if h.ckpt != nil && signal == h.ckpt.cfg.Signal {
		if !h.IsRunning() {
			return errors.New("task is not running")
		}
		h.ckpt.onDemand(d.ctx)
		return nil
	}
	return h.exec.Signal(sig)
}

func (d *Driver) ExecTask(taskID string, cmd []string, timeout time.Duration) (*drivers.ExecTaskResult, error) {
	if len(cmd) == 0 {
		return nil, errors.New("error cmd must have at least one value")
	}
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	if h.exec == nil {
		return nil, errRoleExited
	}
	out, exitCode, err := h.exec.Exec(time.Now().Add(timeout), cmd[0], cmd[1:])
	if err != nil {
		return nil, err
	}
	return &drivers.ExecTaskResult{Stdout: out, ExitResult: &drivers.ExitResult{ExitCode: exitCode}}, nil
}

var _ drivers.ExecTaskStreamingRawDriver = (*Driver)(nil)

func (d *Driver) ExecTaskStreamingRaw(ctx context.Context, taskID string, command []string, tty bool, stream drivers.ExecTaskStream) error {
	if len(command) == 0 {
		return errors.New("error cmd must have at least one value")
	}
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if h.exec == nil {
		return errRoleExited
	}
	return h.exec.ExecStreaming(ctx, command, tty, stream)
}
