package progress

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestURLsFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "planners")
	must.NoError(t, os.WriteFile(file, []byte("http://a:1\n\n# comment\nhttp://b:2\nhttp://a:1\n"), 0o644))
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"none", nil, nil},
		{"canonical", map[string]string{EnvURL: "http://p:8095"}, []string{"http://p:8095"}},
		{"deprecated alias", map[string]string{EnvURLDeprecated: "http://old:1/v1/progress"}, []string{"http://old:1/v1/progress"}},
		{"canonical wins over alias", map[string]string{EnvURL: "http://new", EnvURLDeprecated: "http://old"}, []string{"http://new"}},
		{"file and url", map[string]string{EnvURLsFile: file, EnvURL: "http://c:3"}, []string{"http://a:1", "http://b:2", "http://c:3"}},
		{"file not rendered yet", map[string]string{EnvURLsFile: filepath.Join(dir, "missing")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, URLsFromEnv(envOf(tc.env)))
		})
	}
}

func TestTokenFrom_Order(t *testing.T) {
	secrets := t.TempDir()
	env := map[string]string{EnvSecretsDir: secrets}
	must.Eq(t, "", TokenFrom(envOf(env)))
	must.NoError(t, os.WriteFile(filepath.Join(secrets, DefaultTokenFile), []byte("default-file\n"), 0o600))
	must.Eq(t, "default-file", TokenFrom(envOf(env)))
	env[EnvDefaultToken] = "default-env"
	must.Eq(t, "default-env", TokenFrom(envOf(env)))
	env[EnvToken] = "planner-env"
	must.Eq(t, "planner-env", TokenFrom(envOf(env)))
	must.NoError(t, os.WriteFile(filepath.Join(secrets, TokenFile), []byte(" planner-file \n"), 0o600))
	must.Eq(t, "planner-file", TokenFrom(envOf(env)))
}
