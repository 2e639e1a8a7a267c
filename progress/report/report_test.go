package report

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/progress"
)

func TestMain_ExitCodes(t *testing.T) {
	var got []progress.Sample
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := progress.Decode(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got = append(got, s)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	withToken := map[string]string{progress.EnvURL: srv.URL, progress.EnvToken: "jwt"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"ok", []string{"-step", "5", "-loss", "0.5", "-samples-per-sec", "10", "-workers", "2", "-ps", "1"}, withToken, 0, ""},
		{"no address", []string{"-step", "5", "-loss", "0.5"}, map[string]string{progress.EnvToken: "jwt"}, 2, "no planner address"},
		{"no identity", []string{"-step", "5", "-loss", "0.5"}, map[string]string{progress.EnvURL: srv.URL}, 2, "no workload identity"},
		{"implausible", []string{"-step", "5", "-loss", "1e308"}, withToken, 2, "loss"},
		{"unreachable", []string{"-url", "http://127.0.0.1:1", "-step", "5", "-loss", "0.5"}, withToken, 1, "reporting progress"},
		{"stray argument", []string{"-step", "5", "-loss", "0.5", "extra"}, withToken, 2, `unexpected argument "extra"`},
		{"zero timeout", []string{"-step", "5", "-loss", "0.5", "-timeout", "0s"}, withToken, 2, "-timeout: must be greater than 0"},
		{"bad number", []string{"-step", "five"}, withToken, 2, `invalid value "five" for flag -step`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			must.Eq(t, tc.code, Main(tc.args, env(tc.env), &stderr), must.Sprint(stderr.String()))
			must.StrContains(t, stderr.String(), tc.want)
		})
	}
	must.Eq(t, []progress.Sample{{Step: 5, Loss: 0.5, SamplesPerSec: 10, Workers: 2, PS: 1}}, got)
}
