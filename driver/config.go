package driver

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/consul-template/signals"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/s3store"
	"github.com/caravan-nomad/caravan/internal/metrics"
)

// Chunk size bounds the store accepts (driver/store Options.ChunkSize).
const (
	// minInterval is the shortest periodic checkpoint interval: a task
	// signalled faster does little but checkpoint.
	minInterval = 100 * time.Millisecond

	// defaultGCInterval is checkpoint_gc_interval's default.
	defaultGCInterval = "10m"

	minChunkSize = store.MinChunkSize
	maxChunkSize = store.MaxChunkSize
)

// Config is the plugin configuration (the client's `plugin "caravan"
// { config { ... } }` block), set by the SetConfig RPC.
type Config struct {
	// Enabled turns the driver on. Like raw_exec, it is off until the
	// client's plugin block sets enabled = true: a disabled driver is not
	// fingerprinted (jobs using it are not placed) and starts no task.
	Enabled bool `codec:"enabled"`
	// DeniedHostUids and DeniedHostGids refuse tasks whose user has one of
	// these host UIDs, or is in one of these groups, in raw_exec's format:
	// "0,10-20".
	DeniedHostUids string `codec:"denied_host_uids"`
	DeniedHostGids string `codec:"denied_host_gids"`
	// CheckpointStore is the checkpoint store's root directory: local disk
	// for one node, a shared mount (NFS, ...) every client reaches for
	// migration. Empty disables checkpointing: tasks with a checkpoint
	// block are refused.
	CheckpointStore string `codec:"checkpoint_store"`
	// Store, a `store { ... }` block, keeps checkpoints in an S3 (or
	// S3-compatible) bucket instead: clients need share no file system.
	// At most one of CheckpointStore and Store.
	Store *StoreConfig `codec:"store"`
	// CheckpointRetain is the number of generations kept per task.
	CheckpointRetain int `codec:"checkpoint_retain"`
	// CheckpointChunkSize is the store's chunk size in bytes (0: 4 MiB).
	CheckpointChunkSize int `codec:"checkpoint_chunk_size"`
	// CheckpointGCInterval is how often unreferenced chunks are swept.
	CheckpointGCInterval string `codec:"checkpoint_gc_interval"`
	// NomadAddress is the local Nomad agent's HTTP API, asked for the job
	// incarnation of checkpointing tasks (default: NOMAD_ADDR, else
	// http://127.0.0.1:4646).
	NomadAddress string `codec:"nomad_address"`
	// NomadToken and NomadTokenFile give an ACL token that may read the
	// tasks' jobs (read-job); at most one. Default: NOMAD_TOKEN.
	NomadToken     string `codec:"nomad_token"`
	NomadTokenFile string `codec:"nomad_token_file"`
	// MetricsAddress, when set, serves the driver's Prometheus metrics at
	// http://<address>/metrics; it must be a loopback host:port.
	MetricsAddress string `codec:"metrics_address"`
	// DockerEndpoint and PodmanEndpoint are the Docker-compatible APIs of
	// the engines behind the client's docker and podman drivers (unix://,
	// tcp:// or http://), asked by the restore role for the user a
	// container task runs as. Defaults: DOCKER_HOST, else
	// unix:///var/run/docker.sock; unix:///run/podman/podman.sock.
	DockerEndpoint string `codec:"docker_endpoint"`
	PodmanEndpoint string `codec:"podman_endpoint"`

	gcInterval             time.Duration
	deniedUIDs, deniedGIDs idRanges
}

// StoreConfig is the plugin config's `store` block: an S3 checkpoint store.
// Credentials come from credentials_file or the plugin's AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) environment, never from the
// config itself, and are never logged.
type StoreConfig struct {
	Endpoint        string `codec:"endpoint"`
	Bucket          string `codec:"bucket"`
	Prefix          string `codec:"prefix"`
	Region          string `codec:"region"`
	TLS             bool   `codec:"tls"`
	CACert          string `codec:"ca_cert"`
	PathStyle       bool   `codec:"path_style"`
	CredentialsFile string `codec:"credentials_file"`
}

// s3Config is the s3store configuration of the block.
func (sc *StoreConfig) s3Config() s3store.Config {
	return s3store.Config{
		Endpoint: sc.Endpoint, Bucket: sc.Bucket, Prefix: sc.Prefix, Region: sc.Region,
		TLS: sc.TLS, CACertFile: sc.CACert, PathStyle: sc.PathStyle, CredentialsFile: sc.CredentialsFile,
	}
}

func (c *Config) validate() error {
	if c.CheckpointStore != "" && !filepath.IsAbs(c.CheckpointStore) {
		return fmt.Errorf("checkpoint_store: %q must be an absolute path", c.CheckpointStore)
	}
	if c.Store != nil {
		if c.CheckpointStore != "" {
			return errors.New("store: set either checkpoint_store (a directory) or a store block (S3), not both")
		}
		for field, p := range map[string]string{"store.ca_cert": c.Store.CACert, "store.credentials_file": c.Store.CredentialsFile} {
			if p != "" && !filepath.IsAbs(p) {
				return fmt.Errorf("%s: %q must be an absolute path", field, p)
			}
		}
		if err := c.Store.s3Config().Validate(); err != nil {
			return err
		}
	}
	if c.CheckpointRetain < 1 {
		return fmt.Errorf("checkpoint_retain: must be at least 1, got %d", c.CheckpointRetain)
	}
	if c.CheckpointChunkSize != 0 && (c.CheckpointChunkSize < minChunkSize || c.CheckpointChunkSize > maxChunkSize) {
		return fmt.Errorf("checkpoint_chunk_size: must be 0 (4 MiB) or within [%d, %d] bytes, got %d",
			minChunkSize, maxChunkSize, c.CheckpointChunkSize)
	}
	d, err := time.ParseDuration(c.CheckpointGCInterval)
	if err != nil || d < 0 {
		return fmt.Errorf("checkpoint_gc_interval: %q is not a duration >= 0", c.CheckpointGCInterval)
	}
	c.gcInterval = d
	if c.deniedUIDs, err = parseIDRanges("denied_host_uids", c.DeniedHostUids); err != nil {
		return err
	}
	if c.deniedGIDs, err = parseIDRanges("denied_host_gids", c.DeniedHostGids); err != nil {
		return err
	}
	if c.NomadAddress != "" {
		u, err := url.Parse(c.NomadAddress)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix") {
			return fmt.Errorf("nomad_address: %q must be an http://, https:// or unix:// URL", c.NomadAddress)
		}
	}
	if c.NomadToken != "" && c.NomadTokenFile != "" {
		return errors.New("nomad_token_file: only one of nomad_token and nomad_token_file may be set")
	}
	if c.NomadTokenFile != "" && !filepath.IsAbs(c.NomadTokenFile) {
		return fmt.Errorf("nomad_token_file: %q must be an absolute path", c.NomadTokenFile)
	}
	if c.MetricsAddress != "" {
		if err := metrics.CheckAddress(c.MetricsAddress, false); err != nil {
			return err
		}
	}
	for field, v := range map[string]string{"docker_endpoint": c.DockerEndpoint, "podman_endpoint": c.PodmanEndpoint} {
		if v != "" {
			if err := checkEngineEndpoint(field, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// TaskConfig is the driver configuration of a task (the task's `config`
// block).
type TaskConfig struct {
	Command          string             `codec:"command"`
	Args             []string           `codec:"args"`
	WorkDir          string             `codec:"work_dir"`
	OOMScoreAdj      int                `codec:"oom_score_adj"`
	OverrideCgroupV2 string             `codec:"cgroup_v2_override"`
	OverrideCgroupV1 hclutils.MapStrStr `codec:"cgroup_v1_override"`
	// Checkpoint enables the checkpoint protocol; nil runs the task like
	// raw_exec.
	Checkpoint *CheckpointConfig `codec:"checkpoint"`
}

// Restore-error policies (checkpoint.on_restore_error).
const (
	// OnRestoreErrorFail fails the task when the store cannot be read, so
	// Nomad's restart policy retries instead of silently starting over.
	OnRestoreErrorFail = "fail"
	// OnRestoreErrorStartFresh starts the task without a checkpoint (and
	// says so in an event) when the store cannot be read.
	OnRestoreErrorStartFresh = "start_fresh"
)

// Checkpoint scopes (checkpoint.scope).
const (
	// ScopeAlloc keys checkpoints per allocation index.
	ScopeAlloc = "alloc"
	// ScopeGroup keys one checkpoint series for the whole task group.
	ScopeGroup = "group"
	// ScopeReplica keys checkpoints per allocation index, as ScopeAlloc,
	// for role tasks of a group whose every index holds the whole state:
	// a restore takes the newest checkpoint of any index (replica.go).
	ScopeReplica = "replica"
)

// maxKeyLen bounds checkpoint.key (the store escapes it into one path
// component of at most 255 bytes).
const maxKeyLen = 80

// CheckpointConfig is the task's `checkpoint { ... }` block.
type CheckpointConfig struct {
	// Signal asks the task to checkpoint (default SIGUSR1). A SIGTERM-style
	// signal works too, for frameworks that save and exit on it.
	Signal string `codec:"signal"`
	// Interval is the period of automatic checkpoints ("" or "0": none).
	Interval string `codec:"interval"`
	// Timeout bounds the wait for the task's marker on periodic and
	// on-demand checkpoints (on stop the task's kill_timeout bounds it).
	Timeout string `codec:"timeout"`
	// OnRestoreError is OnRestoreErrorFail or OnRestoreErrorStartFresh.
	OnRestoreError string `codec:"on_restore_error"`
	// Scope is ScopeAlloc (one checkpoint series per allocation index),
	// ScopeGroup (one for the whole task group) or ScopeReplica (per index,
	// restored from the newest of any index; role tasks only).
	Scope string `codec:"scope"`
	// Key, when set, names the checkpoints in place of the job ID, unbound
	// from the job's incarnation: they survive purge and resubmission and
	// can be shared across job IDs.
	Key string `codec:"key"`
	// Role makes the task a lifecycle task that checkpoints another task of
	// its group, whatever that task's driver (docker, podman): RoleRestore
	// (a prestart task), RoleSidecar (a poststart sidecar) or RoleCommit (a
	// poststop task). The task runs no command. "" is an ordinary
	// checkpointing task.
	Role string `codec:"role"`
	// Task (with Role) names the main task whose checkpoints these are: the
	// store key is that task's, as if it ran under this driver.
	Task string `codec:"task"`
	// Dir (with Role) is the checkpoint directory below the allocation's
	// shared directory (alloc/, mounted at /alloc in docker and podman
	// containers), e.g. "checkpoint".
	Dir string `codec:"dir"`
	// WaitTimeout (RoleRestore) bounds the wait for another allocation of
	// the same slot that is still running (its poststop commit may not be
	// written yet).
	WaitTimeout string `codec:"wait_timeout"`

	interval, timeout, waitTimeout time.Duration
}

// Lifecycle roles (checkpoint.role).
const (
	// RoleRestore restores the newest checkpoint of checkpoint.task into
	// the allocation's checkpoint.dir and exits (lifecycle prestart).
	RoleRestore = "restore"
	// RoleCommit commits a marker checkpoint.task wrote into checkpoint.dir,
	// if newer than the newest generation, and exits (lifecycle poststop).
	RoleCommit = "commit"
	// RoleSidecar commits checkpoints of checkpoint.task every
	// checkpoint.interval and on its checkpoint signal, asking for them
	// through the request file (lifecycle poststart, sidecar = true).
	RoleSidecar = "sidecar"
)

// errUnsupportedOption refuses a raw_exec option that caravan's executor,
// Nomad's v1.6 one (the last under an open-source licence), cannot honour:
// a task is refused rather than run without it.
var errUnsupportedOption = errors.New("not supported by the caravan driver: its executor (from Nomad's open-source v1.6 plugin SDK) cannot set it; remove it from the task config")

// validate checks every field and reports every error at once (joined),
// each naming its field, so a bad config is fixed in one round.
func (t *TaskConfig) validate() error {
	var errs []error
	bad := func(err error) { errs = append(errs, err) }
	role := t.Checkpoint != nil && t.Checkpoint.Role != ""
	switch {
	case t.Command == "" && !role:
		bad(errors.New("command: must not be empty"))
	case t.Command != "" && role:
		bad(fmt.Errorf("command: a task with checkpoint.role = %q runs no command", t.Checkpoint.Role))
	}
	// The executor of Nomad's last open-source SDK (v1.6) places a task in
	// a cgroup of its own choosing and cannot be told another one.
	if len(t.OverrideCgroupV1) > 0 {
		bad(fmt.Errorf("cgroup_v1_override: %w", errUnsupportedOption))
	}
	if t.OverrideCgroupV2 != "" {
		bad(fmt.Errorf("cgroup_v2_override: %w", errUnsupportedOption))
	}
	if t.OOMScoreAdj < 0 || t.OOMScoreAdj > 1000 {
		bad(fmt.Errorf("oom_score_adj: must be within [0, 1000], got %d", t.OOMScoreAdj))
	}
	if t.WorkDir != "" && !filepath.IsAbs(t.WorkDir) {
		bad(fmt.Errorf("work_dir: %q must be an absolute path", t.WorkDir))
	}
	if t.Checkpoint != nil {
		errs = append(errs, unjoin(t.Checkpoint.validate())...)
	}
	return joinErrors(errs)
}

// validate checks the checkpoint block, every field, errors joined.
func (c *CheckpointConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, ok := signals.SignalLookup[c.Signal]; !ok {
		bad("checkpoint.signal: unknown signal %q", c.Signal)
	} else if c.Signal == "SIGKILL" || c.Signal == "SIGSTOP" {
		bad("checkpoint.signal: %s cannot be caught by the task", c.Signal)
	}
	var err error
	if c.interval, err = parseDuration(c.Interval); err != nil {
		bad("checkpoint.interval: %w", err)
	} else if c.interval != 0 && c.interval < minInterval {
		bad("checkpoint.interval: %q is shorter than %s", c.Interval, minInterval)
	}
	if c.timeout, err = parseDuration(c.Timeout); err != nil {
		bad("checkpoint.timeout: %w", err)
	} else if c.timeout == 0 {
		bad("checkpoint.timeout: must be positive")
	}
	switch c.OnRestoreError {
	case OnRestoreErrorFail, OnRestoreErrorStartFresh:
	default:
		bad("checkpoint.on_restore_error: %q must be %q or %q", c.OnRestoreError, OnRestoreErrorFail, OnRestoreErrorStartFresh)
	}
	switch c.Scope {
	case "":
		c.Scope = ScopeAlloc // handles saved before scopes existed
	case ScopeAlloc, ScopeGroup:
	case ScopeReplica:
		if c.Role == "" {
			bad("checkpoint.scope: %q is for checkpoint.role tasks (restore, sidecar, commit)", c.Scope)
		}
	default:
		bad("checkpoint.scope: %q must be %q, %q or %q", c.Scope, ScopeAlloc, ScopeGroup, ScopeReplica)
	}
	if err := validateKeyName(c.Key); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateRole()...)
	return joinErrors(errs)
}

// validateRole checks role, task, dir and wait_timeout.
func (c *CheckpointConfig) validateRole() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var err error
	if c.waitTimeout, err = parseDuration(c.WaitTimeout); err != nil {
		bad("checkpoint.wait_timeout: %w", err)
	}
	switch c.Role {
	case "":
		for field, v := range map[string]string{"task": c.Task, "dir": c.Dir, "wait_timeout": c.WaitTimeout} {
			if v != "" {
				bad("checkpoint.%s: only a task with checkpoint.role sets it", field)
			}
		}
		return errs
	case RoleRestore, RoleCommit, RoleSidecar:
	default:
		bad("checkpoint.role: %q must be %q, %q or %q", c.Role, RoleRestore, RoleSidecar, RoleCommit)
	}
	if c.Task == "" {
		bad("checkpoint.task: must name the task whose checkpoints role %q handles", c.Role)
	}
	if c.Dir == "" {
		bad("checkpoint.dir: must name the checkpoint directory below the allocation directory (e.g. \"checkpoint\")")
	} else if filepath.IsAbs(c.Dir) || !filepath.IsLocal(c.Dir) || filepath.Clean(c.Dir) != c.Dir {
		bad("checkpoint.dir: %q must be a clean relative path inside the allocation directory", c.Dir)
	}
	if c.Role != RoleSidecar && c.Interval != "" && c.interval != 0 {
		bad("checkpoint.interval: periodic checkpoints of another task are role %q's; role %q takes none", RoleSidecar, c.Role)
	}
	if c.Role != RoleRestore && c.WaitTimeout != "" {
		bad("checkpoint.wait_timeout: only role %q waits", RoleRestore)
	}
	return errs
}

// errorList is every error of a config on one line ("; "), which is how a
// task event shows it; errors.Is and As see each.
type errorList []error

func (l errorList) Error() string {
	msgs := make([]string, len(l))
	for i, err := range l {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (l errorList) Unwrap() []error { return l }

// joinErrors is nil without errors, else their errorList.
func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errorList(errs)
}

// validateKeyName accepts "" (no override) or a printable name of at most
// maxKeyLen bytes without surrounding spaces.
func validateKeyName(k string) error {
	if k == "" {
		return nil
	}
	if len(k) > maxKeyLen {
		return fmt.Errorf("checkpoint.key: %d bytes, at most %d", len(k), maxKeyLen)
	}
	if strings.TrimSpace(k) != k {
		return fmt.Errorf("checkpoint.key: %q has leading or trailing space", k)
	}
	for _, r := range k {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("checkpoint.key: %q has a non-printable character", k)
		}
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("%q must not be negative", s)
	}
	return d, nil
}
