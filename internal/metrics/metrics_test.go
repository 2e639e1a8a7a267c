package metrics

import (
	"io"
	"net/http"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func TestCheckAddress(t *testing.T) {
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:9102", true},
		{"[::1]:9102", true},
		{"localhost:9102", true},
		{"127.0.0.1:0", true},
		{"0.0.0.0:9102", false},
		{"10.1.2.3:9102", false},
		{":9102", false},
		{"9102", false},
		{"127.0.0.1", false},
		{"127.0.0.1:", false},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			err := CheckAddress(tc.addr, false)
			if tc.ok {
				must.NoError(t, err)
				return
			}
			must.ErrorContains(t, err, "metrics_address")
		})
	}
	must.NoError(t, CheckAddress("10.1.2.3:9102", true))
}

func TestServeRegistry(t *testing.T) {
	s, err := Serve("127.0.0.1:0", NewRegistry(), hclog.NewNullLogger())
	must.NoError(t, err)
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	must.StrContains(t, string(b), "caravan_build_info{goversion=")
	must.StrContains(t, string(b), "process_start_time_seconds")
	must.StrContains(t, string(b), "go_goroutines")
}
