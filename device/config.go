package device

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/device/simulated"
	"github.com/caravan-nomad/caravan/internal/metrics"
)

const (
	// BackendNVML reads real GPUs through libnvidia-ml.
	BackendNVML = "nvml"
	// BackendSimulated advertises the GPUs listed in the simulated block.
	BackendSimulated = "simulated"

	defaultShares    = 4
	defaultMaxShares = 64
	// maxSharesLimit bounds max_shares itself; the memory bound (a share
	// is at least minShareBytes) applies below it.
	maxSharesLimit = 4096
	// minShareBytes is the least GPU memory a share may stand for.
	minShareBytes            = 1 << 20
	defaultFingerprintPeriod = time.Minute
	defaultRecoveryPeriod    = 5 * time.Minute
	defaultMPSPipeDir        = "/tmp/nvidia-mps"
	defaultMPSLogDir         = "/var/log/nvidia-mps"
)

// defaultIgnoredXids are the Xids NVIDIA's k8s-device-plugin treats as
// application errors that leave the GPU healthy: 13 graphics engine
// exception, 31 GPU memory page fault, 43 GPU stopped processing, 45
// preemptive cleanup, 68 video processor exception, 109 context switch
// timeout.
var defaultIgnoredXids = []uint64{13, 31, 43, 45, 68, 109}

// configSpec is the plugin block's config schema.
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"enabled": hclspec.NewDefault(
		hclspec.NewAttr("enabled", "bool", false),
		hclspec.NewLiteral("true"),
	),
	"backend": hclspec.NewDefault(
		hclspec.NewAttr("backend", "string", false),
		hclspec.NewLiteral(`"nvml"`),
	),
	"shares": hclspec.NewDefault(
		hclspec.NewAttr("shares", "number", false),
		hclspec.NewLiteral(strconv.Itoa(defaultShares)),
	),
	"max_shares": hclspec.NewDefault(
		hclspec.NewAttr("max_shares", "number", false),
		hclspec.NewLiteral(strconv.Itoa(defaultMaxShares)),
	),
	"ignored_gpu_ids": hclspec.NewDefault(
		hclspec.NewAttr("ignored_gpu_ids", "list(string)", false),
		hclspec.NewLiteral("[]"),
	),
	"fingerprint_period": hclspec.NewDefault(
		hclspec.NewAttr("fingerprint_period", "string", false),
		hclspec.NewLiteral(`"1m"`),
	),
	"metrics_address": hclspec.NewAttr("metrics_address", "string", false),
	"share_override": hclspec.NewBlockList("share_override", hclspec.NewObject(map[string]*hclspec.Spec{
		"gpu":    hclspec.NewAttr("gpu", "string", true),
		"shares": hclspec.NewAttr("shares", "number", true),
	})),
	"health": hclspec.NewBlock("health", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"enabled":         hclspec.NewAttr("enabled", "bool", false),
		"ignored_xids":    hclspec.NewAttr("ignored_xids", "list(number)", false),
		"critical_xids":   hclspec.NewAttr("critical_xids", "list(number)", false),
		"recovery_period": hclspec.NewAttr("recovery_period", "string", false),
	})),
	"mps": hclspec.NewBlock("mps", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"enabled":  hclspec.NewAttr("enabled", "bool", false),
		"pipe_dir": hclspec.NewAttr("pipe_dir", "string", false),
		"log_dir":  hclspec.NewAttr("log_dir", "string", false),
	})),
	"simulated": simulated.Spec,
})

// Config is the decoded plugin block config.
type Config struct {
	Enabled           bool             `codec:"enabled"`
	Backend           string           `codec:"backend"`
	Shares            int              `codec:"shares"`
	MaxShares         int              `codec:"max_shares"`
	FingerprintPeriod string           `codec:"fingerprint_period"`
	IgnoredGPUIDs     []string         `codec:"ignored_gpu_ids"`
	ShareOverrides    []ShareOverride  `codec:"share_override"`
	Health            *HealthConfig    `codec:"health"`
	MPS               *MPSConfig       `codec:"mps"`
	Simulated         *simulated.Block `codec:"simulated"`

	// MetricsAddress, when set, serves Prometheus metrics at
	// http://<address>/metrics; it must be a loopback host:port.
	MetricsAddress string `codec:"metrics_address"`
}

// ShareOverride sets the share count of the GPUs a selector matches:
// "uuid:<UUID>", "index:<N>" or "model:<name or MIG profile>".
type ShareOverride struct {
	GPU    string `codec:"gpu"`
	Shares int    `codec:"shares"`
}

// HealthConfig tunes Xid-based health checking.
type HealthConfig struct {
	Enabled        *bool    `codec:"enabled"`
	IgnoredXids    []uint64 `codec:"ignored_xids"`
	CriticalXids   []uint64 `codec:"critical_xids"`
	RecoveryPeriod string   `codec:"recovery_period"`
}

// MPSConfig points tasks at a running CUDA MPS control daemon.
type MPSConfig struct {
	Enabled bool   `codec:"enabled"`
	PipeDir string `codec:"pipe_dir"`
	LogDir  string `codec:"log_dir"`
}

// settings is the validated, typed form of Config the plugin runs on.
type settings struct {
	enabled           bool
	backend           string
	shares            int
	fingerprintPeriod time.Duration
	metricsAddress    string
	// ignored are the UUIDs of GPUs and MIG instances never advertised.
	ignored   map[string]bool
	overrides []override
	health    healthPolicy
	mps       MPSConfig
	simulated simulated.Config
}

type selectorKind int

const (
	selectUUID selectorKind = iota
	selectIndex
	selectModel
)

type override struct {
	kind   selectorKind
	value  string
	index  int
	shares int
	field  string
}

// ErrInvalidConfig marks every configuration error.
var ErrInvalidConfig = errors.New("invalid caravan-gpu config")

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// parseConfig validates c, naming the offending field in every error.
func parseConfig(c *Config) (*settings, error) {
	s := &settings{enabled: c.Enabled, backend: c.Backend, shares: c.Shares}
	var errs []error
	switch c.Backend {
	case "":
		s.backend = BackendNVML
	case BackendNVML, BackendSimulated:
	default:
		errs = append(errs, fieldErr("backend", "unknown backend %q (want %q or %q)", c.Backend, BackendNVML, BackendSimulated))
	}
	maxShares := c.MaxShares
	if maxShares == 0 {
		maxShares = defaultMaxShares
	}
	if maxShares < 1 || maxShares > maxSharesLimit {
		errs = append(errs, fieldErr("max_shares", "must be between 1 and %d, got %d", maxSharesLimit, c.MaxShares))
	}
	errs = append(errs, checkShares("shares", c.Shares, maxShares))
	s.fingerprintPeriod = defaultFingerprintPeriod
	if c.FingerprintPeriod != "" {
		d, err := positiveDuration("fingerprint_period", c.FingerprintPeriod)
		if err != nil {
			errs = append(errs, err)
		}
		s.fingerprintPeriod = d
	}
	ignored, err := parseIgnored(c.IgnoredGPUIDs)
	errs = append(errs, err)
	s.ignored = ignored
	if c.MetricsAddress != "" {
		if err := metrics.CheckAddress(c.MetricsAddress, false); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
		}
		s.metricsAddress = c.MetricsAddress
	}
	overrides, overrideErrs := parseOverrides(c.ShareOverrides, maxShares)
	s.overrides = overrides
	errs = append(errs, overrideErrs...)

	hp, err := parseHealth(c.Health)
	errs = append(errs, err)
	s.health = hp

	if c.MPS != nil && c.MPS.Enabled {
		mps, mpsErrs := parseMPS(*c.MPS)
		s.mps = mps
		errs = append(errs, mpsErrs...)
	}

	if s.backend == BackendSimulated {
		sim, err := parseSimulated(c.Simulated)
		errs = append(errs, err)
		s.simulated = sim
		errs = append(errs, checkOverridesMatch(s.overrides, sim))
		errs = append(errs, checkIgnoredMatch(s.ignored, sim))
		if err == nil {
			errs = append(errs, checkShareMemory(s, sim))
		}
	} else if c.Simulated != nil && len(c.Simulated.GPUs) > 0 {
		errs = append(errs, fieldErr("simulated", "set, but backend is %q: set backend = %q to use simulated GPUs", s.backend, BackendSimulated))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// parseOverrides parses the share_override blocks; an override with an
// error is left out and its error returned.
func parseOverrides(in []ShareOverride, maxShares int) ([]override, []error) {
	var out []override
	var errs []error
	for i, o := range in {
		field := fmt.Sprintf("share_override[%d]", i)
		ov, err := parseSelector(field+".gpu", o.GPU)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := checkShares(field+".shares", o.Shares, maxShares); err != nil {
			errs = append(errs, err)
			continue
		}
		ov.shares, ov.field = o.Shares, field
		out = append(out, ov)
	}
	return out, errs
}

// parseMPS fills the MPS directories' defaults and checks they are absolute.
func parseMPS(mps MPSConfig) (MPSConfig, []error) {
	var errs []error
	if mps.PipeDir == "" {
		mps.PipeDir = defaultMPSPipeDir
	}
	if mps.LogDir == "" {
		mps.LogDir = defaultMPSLogDir
	}
	if !strings.HasPrefix(mps.PipeDir, "/") {
		errs = append(errs, fieldErr("mps.pipe_dir", "must be an absolute path, got %q", mps.PipeDir))
	}
	if !strings.HasPrefix(mps.LogDir, "/") {
		errs = append(errs, fieldErr("mps.log_dir", "must be an absolute path, got %q", mps.LogDir))
	}
	return mps, errs
}

// checkShares bounds a share count: 1 to max_shares.
func checkShares(field string, n, maxShares int) error {
	if n < 1 {
		return fieldErr(field, "must be at least 1, got %d", n)
	}
	if n > maxShares {
		return fieldErr(field, "must be at most max_shares = %d, got %d (raise max_shares to allow more)", maxShares, n)
	}
	return nil
}

// shareField names the setting that gives g its share count.
func (s *settings) shareField(g nvml.GPU) string {
	if f := s.overrideFor(g); f != nil {
		return f.field + ".shares"
	}
	return "shares"
}

// checkShareMemory refuses share counts that give a simulated GPU shares
// of less than minShareBytes.
func checkShareMemory(s *settings, sim simulated.Config) error {
	var errs []error
	for _, g := range simulated.Describe(sim) {
		if n := s.sharesFor(g); uint64(n) > g.MemoryBytes/minShareBytes {
			errs = append(errs, fieldErr(s.shareField(g), "%d shares of %s (%d MiB) would be less than 1 MiB each",
				n, g.UUID, g.MemoryBytes>>20))
		}
	}
	return errors.Join(errs...)
}

func positiveDuration(field, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fieldErr(field, "invalid duration %q", v)
	}
	if d <= 0 {
		return 0, fieldErr(field, "must be positive, got %q", v)
	}
	return d, nil
}

func parseSelector(field, v string) (override, error) {
	kind, value, ok := strings.Cut(v, ":")
	if !ok || value == "" {
		return override{}, fieldErr(field, "unknown GPU selector %q (want uuid:<UUID>, index:<N> or model:<name>)", v)
	}
	switch kind {
	case "uuid":
		return override{kind: selectUUID, value: value}, nil
	case "model":
		return override{kind: selectModel, value: value}, nil
	case "index":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return override{}, fieldErr(field, "GPU index must be a non-negative integer, got %q", value)
		}
		return override{kind: selectIndex, index: n, value: value}, nil
	}
	return override{}, fieldErr(field, "unknown GPU selector kind %q in %q (want uuid:, index: or model:)", kind, v)
}

func parseHealth(c *HealthConfig) (healthPolicy, error) {
	hp := healthPolicy{
		enabled:  true,
		ignored:  toSet(defaultIgnoredXids),
		recovery: defaultRecoveryPeriod,
	}
	if c == nil {
		return hp, nil
	}
	if c.Enabled != nil {
		hp.enabled = *c.Enabled
	}
	if c.IgnoredXids != nil {
		hp.ignored = toSet(c.IgnoredXids)
	}
	if len(c.CriticalXids) > 0 {
		hp.critical = toSet(c.CriticalXids)
		for _, x := range c.CriticalXids {
			if hp.ignored[x] {
				return hp, fieldErr("health.critical_xids", "xid %d is also in ignored_xids", x)
			}
		}
	}
	if c.RecoveryPeriod != "" {
		d, err := positiveDuration("health.recovery_period", c.RecoveryPeriod)
		if err != nil {
			return hp, err
		}
		hp.recovery = d
	}
	return hp, nil
}

func toSet(xs []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// parseSimulated validates the simulated block (its schema and checks live
// in device/simulated).
func parseSimulated(b *simulated.Block) (simulated.Config, error) {
	cfg, problems := simulated.Parse(b)
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = fieldErr(p.Field, "%s", p.Msg)
	}
	return cfg, errors.Join(errs...)
}

// parseIgnored checks ignored_gpu_ids: UUIDs as NVML reports them
// ("GPU-..." or "MIG-..."), as in nomad-device-nvidia.
func parseIgnored(ids []string) (map[string]bool, error) {
	set := make(map[string]bool, len(ids))
	var errs []error
	for i, id := range ids {
		field := fmt.Sprintf("ignored_gpu_ids[%d]", i)
		switch {
		case id == "":
			errs = append(errs, fieldErr(field, "must not be empty"))
		case strings.TrimSpace(id) != id:
			errs = append(errs, fieldErr(field, "%q has leading or trailing space", id))
		case strings.HasPrefix(id, "index:") || strings.HasPrefix(id, "uuid:") || strings.HasPrefix(id, "model:"):
			errs = append(errs, fieldErr(field, "%q: list GPU UUIDs as NVML reports them (GPU-... or MIG-...), not selectors", id))
		}
		set[id] = true
	}
	return set, errors.Join(errs...)
}

// isIgnored reports whether g, or the GPU a MIG instance g is part of, is
// listed in ignored_gpu_ids.
func (s *settings) isIgnored(g nvml.GPU) bool {
	return s.ignored[g.UUID] || (g.MIG && s.ignored[g.ParentUUID])
}

// checkIgnoredMatch rejects ignored UUIDs that name no simulated GPU: the
// simulated GPU list is known up front, so a typo is a config error.
func checkIgnoredMatch(ignored map[string]bool, sim simulated.Config) error {
	known := map[string]bool{}
	for _, g := range simulated.Describe(sim) {
		known[g.UUID] = true
	}
	var errs []error
	for id := range ignored {
		if !known[id] {
			errs = append(errs, fieldErr("ignored_gpu_ids", "%q names no simulated GPU", id))
		}
	}
	return errors.Join(errs...)
}

// checkOverridesMatch rejects overrides that select no simulated GPU: the
// GPU list is known up front, so a typo is a config error, not a surprise.
func checkOverridesMatch(ovs []override, sim simulated.Config) error {
	gpus := simulated.Describe(sim)
	var errs []error
	for _, o := range ovs {
		found := false
		for _, g := range gpus {
			if o.matches(g) {
				found = true
				break
			}
		}
		if !found {
			errs = append(errs, fieldErr(o.field+".gpu", "selector %q matches no simulated GPU", o.String()))
		}
	}
	return errors.Join(errs...)
}

func (o override) String() string {
	switch o.kind {
	case selectUUID:
		return "uuid:" + o.value
	case selectIndex:
		return "index:" + o.value
	default:
		return "model:" + o.value
	}
}
