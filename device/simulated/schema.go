package simulated

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"
)

// maxMemoryMiB bounds a simulated GPU's memory (16 TiB).
const maxMemoryMiB = 1 << 24

// Spec is the schema of the device plugin's `simulated { ... }` block.
var Spec = hclspec.NewBlock("simulated", false, hclspec.NewObject(map[string]*hclspec.Spec{
	"seed":           hclspec.NewAttr("seed", "string", false),
	"driver_version": hclspec.NewAttr("driver_version", "string", false),
	"xid_file":       hclspec.NewAttr("xid_file", "string", false),
	"mps_fault_file": hclspec.NewAttr("mps_fault_file", "string", false),
	"state_dir":      hclspec.NewAttr("state_dir", "string", false),
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
}))

// Block is the decoded `simulated` block: the fake GPUs of the backend.
type Block struct {
	Seed          string     `codec:"seed"`
	DriverVersion string     `codec:"driver_version"`
	XidFile       string     `codec:"xid_file"`
	MPSFaultFile  string     `codec:"mps_fault_file"`
	StateDir      string     `codec:"state_dir"`
	GPUs          []GPUBlock `codec:"gpu"`
}

// GPUBlock is one fake GPU.
type GPUBlock struct {
	UUID              string      `codec:"uuid"`
	Model             string      `codec:"model"`
	MemoryMiB         int64       `codec:"memory_mib"`
	ComputeCapability string      `codec:"compute_capability"`
	MIG               []MIGBlock  `codec:"mig"`
	Usage             *UsageBlock `codec:"usage"`
	Xids              []XidBlock  `codec:"xid"`
}

// MIGBlock is one MIG instance of a fake GPU.
type MIGBlock struct {
	Profile   string `codec:"profile"`
	MemoryMiB int64  `codec:"memory_mib"`
}

// UsageBlock is the usage a fake GPU reports per task process that does
// not set EnvMemoryMiB / EnvSMPercent itself.
type UsageBlock struct {
	MemoryMiB int64 `codec:"memory_mib"`
	SMPercent int64 `codec:"sm_percent"`
}

// XidBlock is a scripted Xid event, raised `after` the backend starts.
type XidBlock struct {
	After string `codec:"after"`
	Xid   uint64 `codec:"xid"`
}

// FieldError is one problem in the block, naming its field
// ("simulated.gpu[0].memory_mib").
type FieldError struct {
	Field, Msg string
}

func fieldErr(field, format string, args ...any) FieldError {
	return FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Parse validates b into a Config, returning every problem found.
func Parse(b *Block) (Config, []FieldError) {
	if b == nil || len(b.GPUs) == 0 {
		return Config{}, []FieldError{fieldErr("simulated.gpu", "backend %q needs at least one gpu block", Backend)}
	}
	out := Config{Seed: b.Seed, DriverVersion: b.DriverVersion, XidFile: b.XidFile,
		MPSFaultFile: b.MPSFaultFile, StateDir: b.StateDir}
	var errs []FieldError
	if b.StateDir != "" && !filepath.IsAbs(b.StateDir) {
		errs = append(errs, fieldErr("simulated.state_dir", "must be an absolute path, got %q", b.StateDir))
	}
	uuids := map[string]string{}
	for i, g := range b.GPUs {
		field := fmt.Sprintf("simulated.gpu[%d]", i)
		if g.UUID != "" {
			if prev, ok := uuids[g.UUID]; ok {
				errs = append(errs, fieldErr(field+".uuid", "%q already used by %s", g.UUID, prev))
			}
			uuids[g.UUID] = field
		}
		gc, gerrs := parseGPU(field, g)
		errs = append(errs, gerrs...)
		out.GPUs = append(out.GPUs, gc)
	}
	return out, errs
}

func parseGPU(field string, g GPUBlock) (GPUConfig, []FieldError) {
	gc := GPUConfig{
		UUID:              g.UUID,
		Model:             g.Model,
		MemoryBytes:       uint64(g.MemoryMiB) << 20,
		ComputeCapability: g.ComputeCapability,
	}
	var errs []FieldError
	if g.Model == "" {
		errs = append(errs, fieldErr(field+".model", "must not be empty"))
	}
	errs = appendMemoryErr(errs, field+".memory_mib", g.MemoryMiB)
	var migTotal int64
	for j, m := range g.MIG {
		mf := fmt.Sprintf("%s.mig[%d]", field, j)
		if m.Profile == "" {
			errs = append(errs, fieldErr(mf+".profile", "must not be empty"))
		}
		errs = appendMemoryErr(errs, mf+".memory_mib", m.MemoryMiB)
		migTotal += m.MemoryMiB
		gc.MIG = append(gc.MIG, MIGConfig{Profile: m.Profile, MemoryBytes: uint64(m.MemoryMiB) << 20})
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
		gc.Xids = append(gc.Xids, ScriptedXid{After: d, Xid: x.Xid})
	}
	return gc, errs
}

// appendMemoryErr bounds a simulated memory size.
func appendMemoryErr(errs []FieldError, field string, v int64) []FieldError {
	if v < 1 {
		return append(errs, fieldErr(field, "must be at least 1, got %d", v))
	}
	if v > maxMemoryMiB {
		return append(errs, fieldErr(field, "must be at most %d (16 TiB), got %d", maxMemoryMiB, v))
	}
	return errs
}
