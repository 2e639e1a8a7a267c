package device

import (
	"context"

	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"
)

// Main serves the device plugin to a Nomad client over go-plugin.
func Main(args []string) int {
	plugins.Serve(func(logger log.Logger) interface{} {
		return NewPlugin(context.Background(), logger)
	})
	return 0
}
