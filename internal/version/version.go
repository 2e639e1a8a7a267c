// Package version holds caravan's version, set at build time.
package version

import "fmt"

// Version is the release version; GitCommit is set by the GNUmakefile
// through -ldflags.
var (
	Version   = "0.1.0-dev"
	GitCommit = ""
)

// String is the human-readable version line.
func String() string {
	if GitCommit == "" {
		return fmt.Sprintf("caravan v%s", Version)
	}
	return fmt.Sprintf("caravan v%s (%s)", Version, GitCommit)
}
