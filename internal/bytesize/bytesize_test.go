package bytesize

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestHuman(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1 << 30, "1.0 GiB"},
		{1 << 62, "4.0 EiB"},
	} {
		must.Eq(t, tc.want, Human(tc.n), must.Sprintf("%d bytes", tc.n))
	}
}
