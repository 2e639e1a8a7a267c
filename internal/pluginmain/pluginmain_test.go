package pluginmain

import (
	"bytes"
	"testing"

	log "github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func TestRunRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"-h", "x"}, {"--config", "x.hcl"}, {"stray"}} {
		var stderr bytes.Buffer
		called := false
		code := Run("driver", args, &stderr, func(_ log.Logger) interface{} { called = true; return nil })
		must.Eq(t, 2, code, must.Sprint(args))
		must.False(t, called, must.Sprint("the plugin must not be built for ", args))
		must.StrContains(t, stderr.String(), `args = ["driver"]`)
	}
}

// TestRunHelp: -h alone says what the plugin is, exits 0 and serves nothing.
func TestRunHelp(t *testing.T) {
	var stderr bytes.Buffer
	called := false
	code := Run("device", []string{"-h"}, &stderr, func(_ log.Logger) interface{} { called = true; return nil })
	must.Eq(t, 0, code)
	must.False(t, called)
	must.StrHasPrefix(t, "usage: caravan device\n", stderr.String())
}
