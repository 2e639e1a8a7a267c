// Package version holds caravan's version, set at build time.
package version

import "fmt"

// Version is the release version (without the "v"), the one string every
// part reports: `caravan version`, the planner's /v1/health, the plugins'
// PluginInfo and caravan_build_info. GitCommit is set by the GNUmakefile
// through -ldflags, and so is Version for a release build (VERSION=...).
var (
	Version   = "0.1.0"
	GitCommit = ""
)

// String is the human-readable version line.
func String() string {
	if GitCommit == "" {
		return fmt.Sprintf("caravan v%s", Version)
	}
	return fmt.Sprintf("caravan v%s (%s)", Version, GitCommit)
}
