package driver

import (
	"context"
	"os"

	log "github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/internal/pluginmain"
)

// Main serves the task driver to a Nomad client over go-plugin.
func Main(args []string) int {
	return pluginmain.Run("driver", args, os.Stderr, func(logger log.Logger) interface{} {
		return NewDriver(context.Background(), logger)
	})
}
