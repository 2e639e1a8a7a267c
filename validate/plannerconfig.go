package validate

import (
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/caravan-nomad/caravan/planner/service/config"
)

// plannerBlocks are the top-level blocks of a planner config file; a
// jobspec has none of them (its own are job, variable and locals).
var plannerBlocks = []string{"queue", "queues", "policy", "capacity", "progress", "ui", "nomad", "consul"}

// IsPlannerConfig reports whether the HCL file at path is a planner config
// file: it has a planner block (queue, queues, policy, ...) and no job
// block. A file that cannot be read or parsed at all is not.
func IsPlannerConfig(path string) bool {
	src, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	f, _ := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if f == nil {
		return false
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return false
	}
	planner := false
	for _, b := range body.Blocks {
		if b.Type == "job" {
			return false
		}
		planner = planner || slices.Contains(plannerBlocks, b.Type)
	}
	return planner
}

// PlannerConfig checks the planner config file at path with the planner's
// own loader (config.Load: defaults, the file, validation), which reports
// every error at once: HCL, values, queues.
func PlannerConfig(path string) []error {
	_, err := config.Load(&config.Flags{Configs: []string{path}})
	return leaves(err)
}

// leaves are the lines of config.Load's error, one problem each (it joins
// them with errors.Join), without its "invalid config: " prefix.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	var out []error
	for _, line := range strings.Split(strings.TrimPrefix(err.Error(), "invalid config: "), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, errors.New(line))
		}
	}
	return out
}
