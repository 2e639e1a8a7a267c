package device

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestMainRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--config", "x.hcl"}, {"stray"}} {
		must.Eq(t, 2, Main(args), must.Sprint(args))
	}
}
