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
	minShareBytes = 1 << 20
	// maxMemoryMiB bounds a simulated GPU's memory (16 TiB).
	maxMemoryMiB             = 1 << 24
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
	"simulated": hclspec.NewBlock("simulated", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"seed":           hclspec.NewAttr("seed", "string", false),
		"driver_version": hclspec.NewAttr("driver_version", "string", false),
		"xid_file":       hclspec.NewAttr("xid_file", "string", false),
		"gpu": hclspec.NewBlockList("gpu", hclspec.NewObject(map[string]*hclspec.Spec{
			"uuid":               hclspec.NewAttr("uuid", "string", false),
			"model":              hclspec.NewAttr("model", "string", true),
			"memory_mib":         hclspec.NewAttr("memory_mib", "number", true),
			"compute_capability": hclspec.NewAttr("compute_capability", "string", false),
			"mig": hclspec.NewBlockList("mig", hclspec.NewObject(map[string]*hclspec.Spec{
				"profile":    hclspec.NewAttr("profile", "string", true),
				"memory_mib": hclspec.NewAttr("memory_mib", "number", true),
			})),
			"usage": hclspec.NewBlock("usage", false, hclspec.NewObject(map[string]*hclspec.Spec{
				"memory_mib": hclspec.NewAttr("memory_mib", "number", false),
				"sm_percent": hclspec.NewAttr("sm_percent", "number", false),
			})),
			"xid": hclspec.NewBlockList("xid", hclspec.NewObject(map[string]*hclspec.Spec{
				"after": hclspec.NewAttr("after", "string", true),
				"xid":   hclspec.NewAttr("xid", "number", true),
			})),
		})),
	})),
})

// Config is the decoded plugin block config.
type Config struct {
	Enabled           bool             `codec:"enabled"`
	Backend           string           `codec:"backend"`
	Shares            int              `codec:"shares"`
	MaxShares         int              `codec:"max_shares"`
	FingerprintPeriod string           `codec:"fingerprint_period"`
	ShareOverrides    []ShareOverride  `codec:"share_override"`
	Health            *HealthConfig    `codec:"health"`
	MPS               *MPSConfig       `codec:"mps"`
	Simulated         *SimulatedConfig `codec:"simulated"`

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

// SimulatedConfig lists the fake GPUs of the simulated backend.
type SimulatedConfig struct {
	Seed          string               `codec:"seed"`
	DriverVersion string               `codec:"driver_version"`
	XidFile       string               `codec:"xid_file"`
	GPUs          []SimulatedGPUConfig `codec:"gpu"`
}

// SimulatedGPUConfig is one fake GPU.
type SimulatedGPUConfig struct {
	UUID              string               `codec:"uuid"`
	Model             string               `codec:"model"`
	MemoryMiB         int64                `codec:"memory_mib"`
	ComputeCapability string               `codec:"compute_capability"`
	MIG               []SimulatedMIGConfig `codec:"mig"`
	Usage             *SimulatedUsage      `codec:"usage"`
	Xids              []SimulatedXid       `codec:"xid"`
}

// SimulatedMIGConfig is one MIG instance of a fake GPU.
type SimulatedMIGConfig struct {
	Profile   string `codec:"profile"`
	MemoryMiB int64  `codec:"memory_mib"`
}

// SimulatedUsage is the usage a fake GPU reports per task process that
// does not set CARAVAN_SIMULATED_GPU_MEMORY_MIB / _SM_PERCENT itself.
type SimulatedUsage struct {
	MemoryMiB int64 `codec:"memory_mib"`
	SMPercent int64 `codec:"sm_percent"`
}

// SimulatedXid is a scripted Xid event, raised `after` the backend starts.
type SimulatedXid struct {
	After string `codec:"after"`
	Xid   uint64 `codec:"xid"`
}

// settings is the validated, typed form of Config the plugin runs on.
type settings struct {
	enabled           bool
	backend           string
	shares            int
	fingerprintPeriod time.Duration
	metricsAddress    string
	overrides         []override
	health            healthPolicy
	mps               MPSConfig
	simulated         simulated.Config
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
	if c.MetricsAddress != "" {
		if err := metrics.CheckAddress(c.MetricsAddress, false); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
		}
		s.metricsAddress = c.MetricsAddress
	}
	for i, o := range c.ShareOverrides {
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
		s.overrides = append(s.overrides, ov)
	}

	hp, err := parseHealth(c.Health)
	errs = append(errs, err)
	s.health = hp

	if c.MPS != nil && c.MPS.Enabled {
		s.mps = *c.MPS
		if s.mps.PipeDir == "" {
			s.mps.PipeDir = defaultMPSPipeDir
		}
		if s.mps.LogDir == "" {
			s.mps.LogDir = defaultMPSLogDir
		}
		if !strings.HasPrefix(s.mps.PipeDir, "/") {
			errs = append(errs, fieldErr("mps.pipe_dir", "must be an absolute path, got %q", s.mps.PipeDir))
		}
		if !strings.HasPrefix(s.mps.LogDir, "/") {
			errs = append(errs, fieldErr("mps.log_dir", "must be an absolute path, got %q", s.mps.LogDir))
		}
	}

	if s.backend == BackendSimulated {
		sim, err := parseSimulated(c.Simulated)
		errs = append(errs, err)
		s.simulated = sim
		errs = append(errs, checkOverridesMatch(s.overrides, sim))
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

// checkMemoryMiB bounds a simulated memory size.
func checkMemoryMiB(field string, v int64) error {
	if v < 1 {
		return fieldErr(field, "must be at least 1, got %d", v)
	}
	if v > maxMemoryMiB {
		return fieldErr(field, "must be at most %d (16 TiB), got %d", maxMemoryMiB, v)
	}
	return nil
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

func parseSimulated(c *SimulatedConfig) (simulated.Config, error) {
	if c == nil || len(c.GPUs) == 0 {
		return simulated.Config{}, fieldErr("simulated.gpu", "backend %q needs at least one gpu block", BackendSimulated)
	}
	out := simulated.Config{Seed: c.Seed, DriverVersion: c.DriverVersion, XidFile: c.XidFile}
	var errs []error
	uuids := map[string]string{}
	for i, g := range c.GPUs {
		field := fmt.Sprintf("simulated.gpu[%d]", i)
		gc := simulated.GPUConfig{
			UUID:              g.UUID,
			Model:             g.Model,
			MemoryBytes:       uint64(g.MemoryMiB) << 20,
			ComputeCapability: g.ComputeCapability,
		}
		if g.Model == "" {
			errs = append(errs, fieldErr(field+".model", "must not be empty"))
		}
		if err := checkMemoryMiB(field+".memory_mib", g.MemoryMiB); err != nil {
			errs = append(errs, err)
		}
		if g.UUID != "" {
			if prev, ok := uuids[g.UUID]; ok {
				errs = append(errs, fieldErr(field+".uuid", "%q already used by %s", g.UUID, prev))
			}
			uuids[g.UUID] = field
		}
		var migTotal int64
		for j, m := range g.MIG {
			mf := fmt.Sprintf("%s.mig[%d]", field, j)
			if m.Profile == "" {
				errs = append(errs, fieldErr(mf+".profile", "must not be empty"))
			}
			if err := checkMemoryMiB(mf+".memory_mib", m.MemoryMiB); err != nil {
				errs = append(errs, err)
			}
			migTotal += m.MemoryMiB
			gc.MIG = append(gc.MIG, simulated.MIGConfig{Profile: m.Profile, MemoryBytes: uint64(m.MemoryMiB) << 20})
		}
		if migTotal > g.MemoryMiB && g.MemoryMiB > 0 {
			errs = append(errs, fieldErr(field+".mig", "instances need %d MiB, more than the GPU's %d MiB", migTotal, g.MemoryMiB))
		}
		if g.Usage != nil {
			if g.Usage.MemoryMiB < 0 {
				errs = append(errs, fieldErr(field+".usage.memory_mib", "must not be negative, got %d", g.Usage.MemoryMiB))
			}
			if g.Usage.SMPercent < 0 || g.Usage.SMPercent > 100 {
				errs = append(errs, fieldErr(field+".usage.sm_percent", "must be within 0..100, got %d", g.Usage.SMPercent))
			}
			gc.ProcessMemoryBytes = uint64(max(g.Usage.MemoryMiB, 0)) << 20
			gc.ProcessSMPercent = uint32(min(max(g.Usage.SMPercent, 0), 100))
		}
		for j, x := range g.Xids {
			xf := fmt.Sprintf("%s.xid[%d]", field, j)
			d, err := time.ParseDuration(x.After)
			if err != nil || d < 0 {
				errs = append(errs, fieldErr(xf+".after", "invalid duration %q", x.After))
				continue
			}
			gc.Xids = append(gc.Xids, simulated.ScriptedXid{After: d, Xid: x.Xid})
		}
		out.GPUs = append(out.GPUs, gc)
	}
	return out, errors.Join(errs...)
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
