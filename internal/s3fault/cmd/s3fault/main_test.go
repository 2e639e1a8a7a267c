package main

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestCheckFlags_LoopbackOnly: the control endpoint has no authentication,
// so the proxy refuses to listen anywhere but on loopback.
func TestCheckFlags_LoopbackOnly(t *testing.T) {
	const target = "http://127.0.0.1:9000"
	cases := []struct {
		name, listen, control, target, want string
	}{
		{"loopback", "127.0.0.1:1", "[::1]:2", target, ""},
		{"all interfaces", "0.0.0.0:1", "127.0.0.1:2", target, `-listen: "0.0.0.0:1" is not a loopback address`},
		{"no host", "127.0.0.1:1", ":2", target, `-control: ":2" is not a loopback address`},
		{"a name", "localhost:1", "127.0.0.1:2", target, `-listen: "localhost:1" is not a loopback address`},
		{"no port", "127.0.0.1", "127.0.0.1:2", target, `-listen: "127.0.0.1" is not host:port`},
		{"bad target", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:9000", `-target: "127.0.0.1:9000" is not an http(s) URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := checkFlags(tc.listen, tc.control, tc.target)
			if tc.want == "" {
				must.NoError(t, err)
				must.Eq(t, tc.target, u.String())
				return
			}
			must.ErrorContains(t, err, tc.want)
		})
	}
}
