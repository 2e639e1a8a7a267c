package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables a task reads.
const (
	// EnvURL is the planner's base URL (canonical).
	EnvURL = "CARAVAN_PLANNER_URL"
	// EnvURLsFile names a file of newline-separated planner base URLs (a
	// Nomad template listing every healthy instance from Consul), re-read
	// before each report.
	EnvURLsFile = "CARAVAN_PLANNER_URLS_FILE"
	// EnvURLDeprecated is the trainer's old name for EnvURL, still read.
	EnvURLDeprecated = "CARAVAN_PROGRESS_URL"
	// EnvToken and EnvDefaultToken hold the task's workload identity: the
	// identity named "planner", then the default one.
	EnvToken        = "NOMAD_TOKEN_planner"
	EnvDefaultToken = "NOMAD_TOKEN"
	// EnvSecretsDir is the task's secrets directory (Nomad sets it).
	EnvSecretsDir = "NOMAD_SECRETS_DIR"
	// TokenFile and DefaultTokenFile are the identity files in the secrets
	// directory (identity blocks with file = true).
	TokenFile        = "nomad_planner.jwt"
	DefaultTokenFile = "nomad_token"
)

// URLFromEnv returns the planner URL from $CARAVAN_PLANNER_URL, else the
// deprecated $CARAVAN_PROGRESS_URL ("" when neither is set).
func URLFromEnv(getenv func(string) string) string {
	if u := strings.TrimSpace(getenv(EnvURL)); u != "" {
		return u
	}
	return strings.TrimSpace(getenv(EnvURLDeprecated))
}

// URLsFromEnv returns every planner URL the environment names: the file
// $CARAVAN_PLANNER_URLS_FILE (re-read at each call) and URLFromEnv.
func URLsFromEnv(getenv func(string) string) []string {
	var urls []string
	if f := getenv(EnvURLsFile); f != "" {
		urls = ReadURLsFile(f)
	}
	if u := URLFromEnv(getenv); u != "" && !contains(urls, u) {
		urls = append(urls, u)
	}
	return urls
}

// ReadURLsFile reads one URL per line, skipping blanks and # comments. A
// missing or unreadable file gives none (the template may not be rendered
// yet).
func ReadURLsFile(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var urls []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !contains(urls, l) {
			urls = append(urls, l)
		}
	}
	return urls
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TokenFromEnv finds the task's workload identity in the process
// environment; see TokenFrom.
func TokenFromEnv() string { return TokenFrom(os.Getenv) }

// TokenFrom finds the task's workload identity, in order: the file
// $NOMAD_SECRETS_DIR/nomad_planner.jwt (kept fresh when the identity has a
// ttl), $NOMAD_TOKEN_planner, $NOMAD_TOKEN, then the file
// $NOMAD_SECRETS_DIR/nomad_token. It returns "" when none is present.
func TokenFrom(getenv func(string) string) string {
	secrets := getenv(EnvSecretsDir)
	read := func(name string) string {
		if secrets == "" {
			return ""
		}
		b, err := os.ReadFile(filepath.Join(secrets, name))
		if err != nil {
			return ""
		}
		return string(bytes.TrimSpace(b))
	}
	if v := read(TokenFile); v != "" {
		return v
	}
	if v := strings.TrimSpace(getenv(EnvToken)); v != "" {
		return v
	}
	if v := strings.TrimSpace(getenv(EnvDefaultToken)); v != "" {
		return v
	}
	return read(DefaultTokenFile)
}

var osGetenv = os.Getenv
