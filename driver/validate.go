package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	hjson "github.com/hashicorp/hcl/v2/json"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/zclconf/go-cty/cty"
)

// ValidateTaskConfig checks a task's `config` block as a jobspec parser
// hands it over (jobspec2: a map), the way the Nomad client and StartTask
// will: decoded with the driver's schema, then validated. It returns every
// error at once, each naming its field, for `caravan validate`: an unknown
// attribute (a typo) is reported and the rest of the block still checked.
//
// Runtime interpolations (${NOMAD_TASK_DIR}, ${attr.x}, ...) are not known
// before placement: each stands for a placeholder absolute path, so a field
// built from one is checked for its shape only.
func ValidateTaskConfig(config map[string]any) []error {
	_, errs := decodeTaskConfig(config)
	return errs
}

// decodeTaskConfig decodes and validates config; the TaskConfig is nil when
// it could not be decoded. When decoding fails, the attributes and blocks
// the schema does not know are dropped and the rest decoded again, so a
// typo does not hide the errors of its neighbours.
func decodeTaskConfig(config map[string]any) (*TaskConfig, []error) {
	spec, diags := hclspecutils.Convert(taskConfigSpec)
	if diags.HasErrors() {
		return nil, []error{fmt.Errorf("task config schema: %w", diags)}
	}
	tc, errs := decodeWithSpec(config, spec)
	if len(errs) > 0 {
		pruned, dropped := pruneUnknown(config, spec, "")
		if len(dropped) == 0 {
			return nil, errs
		}
		errs = nameFields(errs, dropped)
		var more []error
		if tc, more = decodeWithSpec(pruned, spec); tc == nil {
			return nil, append(errs, more...)
		}
	}
	return tc, append(errs, unjoin(tc.validate())...)
}

// decodeWithSpec is the Nomad client's decoding of a task config with the
// driver's schema, then StartTask's.
func decodeWithSpec(config map[string]any, spec hcldec.Spec) (*TaskConfig, []error) {
	vars, err := placeholderVars(config, spec)
	if err != nil {
		return nil, []error{err}
	}
	val, _, errs := hclutils.ParseHclInterface(config, spec, vars)
	if len(errs) > 0 {
		return nil, errs
	}
	dtc := &drivers.TaskConfig{}
	if err := dtc.EncodeDriverConfig(val); err != nil {
		return nil, []error{fmt.Errorf("encode task config: %w", err)}
	}
	var tc TaskConfig
	if err := dtc.DecodeDriverConfig(&tc); err != nil {
		return nil, []error{fmt.Errorf("decode task config: %w", err)}
	}
	return &tc, nil
}

// pruneUnknown copies config without the attributes and blocks spec does
// not name (at any depth), and returns the paths it dropped
// ("checkpoint.intervall"); prefix is the path of config itself.
func pruneUnknown(config map[string]any, spec hcldec.Spec, prefix string) (map[string]any, []string) {
	known := specFields(spec)
	out := make(map[string]any, len(config))
	var dropped []string
	for k, v := range config {
		sub, ok := known[k]
		switch {
		case !ok:
			dropped = append(dropped, prefix+k)
		case sub == nil:
			out[k] = v
		default:
			var d []string
			out[k], d = pruneBlocks(v, sub, prefix+k+".")
			dropped = append(dropped, d...)
		}
	}
	return out, dropped
}

// pruneBlocks prunes a block's body: jobspec2 hands a block over as a list
// of maps (one per occurrence) or a map.
func pruneBlocks(v any, spec hcldec.Spec, prefix string) (any, []string) {
	switch b := v.(type) {
	case map[string]any:
		return pruneUnknown(b, spec, prefix)
	case []map[string]any:
		out, dropped := make([]any, len(b)), []string(nil)
		for i, m := range b {
			var d []string
			out[i], d = pruneUnknown(m, spec, prefix)
			dropped = append(dropped, d...)
		}
		return out, dropped
	case []any:
		out, dropped := make([]any, len(b)), []string(nil)
		for i, e := range b {
			var d []string
			out[i], d = pruneBlocks(e, spec, prefix)
			dropped = append(dropped, d...)
		}
		return out, dropped
	}
	return v, nil
}

// nameFields prefixes the decoder's error about an unknown name with the
// name's path in the config ("checkpoint.intervall: "), which the
// decoder's text lacks.
func nameFields(errs []error, dropped []string) []error {
	out := make([]error, len(errs))
	for i, err := range errs {
		out[i] = err
		for _, path := range dropped {
			name := path[strings.LastIndexByte(path, '.')+1:]
			if strings.Contains(err.Error(), strconv.Quote(name)) {
				out[i] = fmt.Errorf("%s: %w", path, err)
				break
			}
		}
	}
	return out
}

// specFields are the names an object spec knows: nil for an attribute,
// the nested spec for a block.
func specFields(spec hcldec.Spec) map[string]hcldec.Spec {
	obj, ok := spec.(hcldec.ObjectSpec)
	if !ok {
		return nil
	}
	out := map[string]hcldec.Spec{}
	for _, s := range obj {
		for {
			d, ok := s.(*hcldec.DefaultSpec)
			if !ok {
				break
			}
			s = d.Primary
		}
		switch f := s.(type) {
		case *hcldec.AttrSpec:
			out[f.Name] = nil
		case *hcldec.BlockSpec:
			out[f.TypeName] = f.Nested
		case *hcldec.BlockListSpec:
			out[f.TypeName] = f.Nested
		}
	}
	return out
}

// placeholderVars gives every variable config refers to a placeholder
// value: "/" followed by its path, e.g. ${NOMAD_TASK_DIR} is
// "/NOMAD_TASK_DIR" and ${attr.unique.hostname} "/attr.unique.hostname".
func placeholderVars(config map[string]any, spec hcldec.Spec) (map[string]cty.Value, error) {
	raw, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("encode task config: %w", err)
	}
	f, diags := hjson.Parse(raw, "config")
	if diags.HasErrors() {
		return nil, fmt.Errorf("task config: %w", diags)
	}
	tree := map[string]any{}
	for _, tr := range hcldec.Variables(f.Body, spec) {
		node := tree
		path := []string{tr.RootName()}
		for _, step := range tr[1:] {
			if a, ok := step.(hcl.TraverseAttr); ok {
				path = append(path, a.Name)
			}
		}
		for i, name := range path {
			if i == len(path)-1 {
				if _, ok := node[name]; !ok {
					node[name] = "/" + strings.Join(path, ".")
				}
				break
			}
			next, ok := node[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[name] = next
			}
			node = next
		}
	}
	out := map[string]cty.Value{}
	for k, v := range tree {
		out[k] = ctyOf(v)
	}
	return out, nil
}

func ctyOf(v any) cty.Value {
	m, ok := v.(map[string]any)
	if !ok {
		return cty.StringVal(v.(string))
	}
	attrs := map[string]cty.Value{}
	for k, sub := range m {
		attrs[k] = ctyOf(sub)
	}
	return cty.ObjectVal(attrs)
}

// unjoin splits an errors.Join result into its errors.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		return j.Unwrap()
	}
	return []error{err}
}
