// Package s3store is the checkpoint store's S3 backend (store.Backend), for
// AWS S3 and S3-compatible servers (SeaweedFS, Ceph RGW, ...). It uses
// aws-sdk-go-v2; see ../README.md for why and for what the store relies on.
package s3store

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Config is the driver plugin's `store` block.
type Config struct {
	// Endpoint is host[:port] of the S3 API, without a scheme.
	Endpoint string
	Bucket   string
	// Prefix keeps this cluster's (or team's) objects apart from others'
	// in a shared bucket: every object name starts with it.
	Prefix string
	Region string
	// TLS selects https; CACertFile adds a PEM CA bundle to trust.
	TLS        bool
	CACertFile string
	// PathStyle addresses the bucket as endpoint/bucket rather than
	// bucket.endpoint (most self-hosted servers need it).
	PathStyle bool

	// Credentials: set directly (tests), else read from CredentialsFile
	// (the AWS shared credentials format; profile AWS_PROFILE or
	// "default"; re-read when it changes), else from AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else from the AWS SDK's
	// refreshing providers (credentials.go). Never logged: String and
	// GoString redact them.
	AccessKeyID, SecretAccessKey, SessionToken string
	CredentialsFile                            string
}

// ErrConfig is wrapped by every configuration error; each names the HCL
// field (store.endpoint, store.bucket, ...) at fault.
var ErrConfig = errors.New("invalid checkpoint store config")

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: store.%s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

// Validate checks the fields without contacting the server.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.Endpoint == "":
		errs = append(errs, fieldErr("endpoint", "must be set (host[:port])"))
	case strings.Contains(c.Endpoint, "://"):
		errs = append(errs, fieldErr("endpoint", "%q: give host[:port] without a scheme (set store.tls for https)", c.Endpoint))
	case strings.ContainsAny(c.Endpoint, "/?# "):
		errs = append(errs, fieldErr("endpoint", "%q: give host[:port] only", c.Endpoint))
	default:
		if _, port, err := net.SplitHostPort(c.Endpoint); err == nil && port == "" {
			errs = append(errs, fieldErr("endpoint", "%q: empty port", c.Endpoint))
		}
	}
	if err := validBucket(c.Bucket); err != nil {
		errs = append(errs, err)
	}
	if strings.HasPrefix(c.Prefix, "/") || strings.Contains(c.Prefix, "//") || strings.Contains(c.Prefix, "..") {
		errs = append(errs, fieldErr("prefix", "%q: want a relative path such as \"team-a/cluster-1\"", c.Prefix))
	}
	if c.CACertFile != "" {
		if !c.TLS {
			errs = append(errs, fieldErr("ca_cert", "set without store.tls = true"))
		} else if _, err := os.Stat(c.CACertFile); err != nil {
			errs = append(errs, fieldErr("ca_cert", "%v", err))
		}
	}
	if c.CredentialsFile != "" {
		if _, err := os.Stat(c.CredentialsFile); err != nil {
			errs = append(errs, fieldErr("credentials_file", "%v", err))
		}
	}
	return errors.Join(errs...)
}

// validBucket applies S3's bucket naming rules (3-63 lower-case letters,
// digits, dots and hyphens, starting and ending with a letter or digit).
func validBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fieldErr("bucket", "%q: must be 3 to 63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		ch := b[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || (ch == '.' || ch == '-') && i > 0 && i < len(b)-1
		if !ok {
			return fieldErr("bucket", "%q: only lower-case letters, digits, '.' and '-' (not first or last)", b)
		}
	}
	return nil
}

// String describes the store without its credentials.
func (c Config) String() string {
	scheme := "http"
	if c.TLS {
		scheme = "https"
	}
	s := fmt.Sprintf("s3://%s/%s (%s://%s", c.Bucket, strings.Trim(c.Prefix, "/"), scheme, c.Endpoint)
	if c.Region != "" {
		s += ", region " + c.Region
	}
	return s + ")"
}

// GoString is String: %#v never prints the credentials either.
func (c Config) GoString() string { return "s3store.Config{" + c.String() + ", credentials redacted}" }

// profile is the shared credentials file's profile the store reads.
func profile() string {
	if p := os.Getenv("AWS_PROFILE"); p != "" {
		return p
	}
	return "default"
}
