package device

import (
	"context"
	"os"

	log "github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/internal/pluginmain"
)

// Main serves the device plugin to a Nomad client over go-plugin.
func Main(args []string) int {
	return pluginmain.Run("device", args, os.Stderr, func(logger log.Logger) interface{} {
		return NewPlugin(context.Background(), logger)
	})
}
