package driver

import (
	"encoding/json"
	"errors"
	"fmt"
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
// error at once, each naming its field, for `caravan validate`.
//
// Runtime interpolations (${NOMAD_TASK_DIR}, ${attr.x}, ...) are not known
// before placement: each stands for a placeholder absolute path, so a field
// built from one is checked for its shape only.
func ValidateTaskConfig(config map[string]any) []error {
	tc, errs := decodeTaskConfig(config)
	if len(errs) > 0 {
		return errs
	}
	return unjoin(tc.validate())
}

// decodeTaskConfig decodes a jobspec's task config with the driver's
// schema, runtime interpolations standing for placeholders.
func decodeTaskConfig(config map[string]any) (*TaskConfig, []error) {
	spec, diags := hclspecutils.Convert(taskConfigSpec)
	if diags.HasErrors() {
		return nil, []error{fmt.Errorf("task config schema: %w", diags)}
	}
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
