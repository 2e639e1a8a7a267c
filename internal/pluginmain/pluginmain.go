// Package pluginmain is the start-up shared by caravan's two Nomad plugins
// (`caravan device` and `caravan driver`): refuse stray arguments, then serve
// the plugin to the Nomad client over go-plugin.
package pluginmain

import (
	"fmt"
	"io"

	"github.com/hashicorp/nomad/plugins"

	"github.com/caravan-nomad/caravan/internal/cli"
)

// Factory builds the plugin with the logger go-plugin hands it.
type Factory = plugins.PluginFactory

// Run serves the plugin named sub (the `caravan` subcommand) and returns the
// process exit code. A Nomad client starts a plugin with no arguments
// besides the subcommand, so any argument is a misconfigured plugin block:
// Run explains that on stderr and returns 2 without serving; -h alone
// prints what the subcommand is for there and returns 0.
func Run(sub string, args []string, stderr io.Writer, factory Factory) int {
	if cli.IsHelp(args) {
		fmt.Fprintf(stderr, "usage: caravan %s\n\nServes caravan's %s plugin to the Nomad client that starts it, over go-plugin; "+
			"it takes no arguments.\nA Nomad client starts it from a plugin block with args = [%q] (see README.md).\n", sub, sub, sub)
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "caravan %s: takes no arguments, got %q; a Nomad client starts it from a plugin block with args = [%q] (see README.md)\n",
			sub, args, sub)
		return 2
	}
	plugins.Serve(factory)
	return 0
}
