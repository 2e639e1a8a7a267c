package version

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestStringCarriesVersion(t *testing.T) {
	must.StrContains(t, String(), "v"+Version)
	must.False(t, strings.HasPrefix(Version, "v"), must.Sprint("Version is written without the v"))
}
