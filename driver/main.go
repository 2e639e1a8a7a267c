package driver

import (
	"context"
	"fmt"
	"os"

	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"
)

// Main serves the task driver to a Nomad client over go-plugin.
func Main(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "caravan driver: takes no arguments, got %q; a Nomad client starts it from a plugin block with args = [\"driver\"] (see README.md)\n", args)
		return 2
	}
	plugins.Serve(func(logger log.Logger) interface{} {
		return NewDriver(context.Background(), logger)
	})
	return 0
}
