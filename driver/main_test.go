package driver

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestMainRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"-h", "x"}, {"--config", "x.hcl"}, {"stray"}} {
		must.Eq(t, 2, Main(args), must.Sprint(args))
	}
}

// TestMainHelp: -h alone prints the usage (internal/pluginmain) and exits 0.
func TestMainHelp(t *testing.T) {
	must.Eq(t, 0, Main([]string{"-h"}))
}
