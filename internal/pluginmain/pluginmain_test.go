package pluginmain

import (
	"bytes"
	"testing"

	log "github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func TestRunRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--config", "x.hcl"}, {"stray"}} {
		var stderr bytes.Buffer
		called := false
		code := Run("driver", args, &stderr, func(_ log.Logger) interface{} { called = true; return nil })
		must.Eq(t, 2, code, must.Sprint(args))
		must.False(t, called, must.Sprint("the plugin must not be built for ", args))
		must.StrContains(t, stderr.String(), `args = ["driver"]`)
	}
}
