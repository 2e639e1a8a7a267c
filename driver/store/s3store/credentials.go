package s3store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Credentials that change while the plugin runs. Keys are looked up, in
// order, from:
//
//   - the Config's own keys (tests): static;
//   - store.credentials_file: its keys are re-read whenever the file's
//     modification time or size changes, and once after the server refuses
//     them (fileCredentials); a profile with credential_process runs it
//     again before its credentials expire (the SDK's processcreds, in an
//     aws.CredentialsCache);
//   - AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: static (a running
//     process's environment cannot change);
//   - the AWS SDK's default chain without EC2 instance metadata: web
//     identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN), container
//     credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI), and
//     the shared config's profile (credential_process, SSO, assumed roles),
//     each refreshed by the SDK before it expires. A profile of the shared
//     credentials file (AWS_SHARED_CREDENTIALS_FILE, else
//     ~/.aws/credentials) that holds plain keys is read as
//     store.credentials_file is, so a rewritten file is picked up too.
//
// A request the server refuses with 403 InvalidAccessKeyId or
// SignatureDoesNotMatch makes the store ask its source for fresh
// credentials (re-read the file, invalidate the SDK's cache) and tries it
// once more; refused again, the error names the source and what to do.

// credSource is a Backend's credentials and where they come from.
type credSource struct {
	provider aws.CredentialsProvider
	// source names where the keys come from; advice says what to do when
	// the server refuses them.
	source, advice string
	// invalidate makes the next request read the credentials afresh.
	invalidate func()
	// last is when invalidate last ran (unix nanoseconds), which
	// refresh rate-limits.
	last atomic.Int64
}

// refreshEvery bounds how often refused requests make the source read its
// credentials afresh: many uploads refused at once re-read them once.
const refreshEvery = time.Second

// refresh asks the source for fresh credentials, at most once per
// refreshEvery.
func (cs *credSource) refresh() {
	if cs == nil || cs.invalidate == nil {
		return
	}
	now := time.Now().UnixNano()
	last := cs.last.Load()
	if now-last < int64(refreshEvery) || !cs.last.CompareAndSwap(last, now) {
		return
	}
	cs.invalidate()
}

// credentialSource resolves c's credentials without contacting the server
// (a credential_process or the SDK's providers run at the first request).
func (c Config) credentialSource(ctx context.Context) (*credSource, error) {
	switch {
	case c.AccessKeyID != "" || c.SecretAccessKey != "":
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return nil, fieldErr("credentials_file", "the store's own keys need both the access key and the secret")
		}
		return &credSource{
			provider: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken),
			source:   "the store configuration's keys",
			advice:   "give the store the new keys and start it again",
		}, nil
	case c.CredentialsFile != "":
		cs, err := profileSource(ctx, c.CredentialsFile, profile(), "store.credentials_file "+c.CredentialsFile)
		if err != nil {
			return nil, fieldErr("credentials_file", "%v", err)
		}
		return cs, nil
	case os.Getenv("AWS_ACCESS_KEY_ID") != "" || os.Getenv("AWS_SECRET_ACCESS_KEY") != "":
		ak, sk := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
		if ak == "" || sk == "" {
			return nil, fieldErr("credentials_file", "the plugin's environment has only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		return &credSource{
			provider: credentials.NewStaticCredentialsProvider(ak, sk, os.Getenv("AWS_SESSION_TOKEN")),
			source:   "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the plugin's environment",
			advice: "a running plugin's environment cannot change: put the keys in a file named by " +
				"store.credentials_file (re-read whenever it changes) or restart the plugin with the new keys",
		}, nil
	}
	return defaultChain(ctx)
}

// defaultChain is the SDK's default credential chain, less EC2 instance
// metadata (never probed: a plugin outside EC2 would wait for it at every
// start); a shared credentials file's plain keys are read by
// fileCredentials instead of the SDK's static provider.
func defaultChain(ctx context.Context) (*credSource, error) {
	file := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		file = config.DefaultSharedCredentialsFilename()
	}
	if os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") == "" {
		if sc, err := loadProfile(ctx, file, profile()); err == nil && plainKeys(sc) {
			return profileSource(ctx, file, profile(), "the shared credentials file "+file)
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithSharedConfigProfile(profile()),
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	if err != nil {
		return nil, fieldErr("credentials_file",
			"no credentials: set store.credentials_file, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the plugin's environment (%v)", err)
	}
	cs := &credSource{
		provider: cfg.Credentials,
		source: "the AWS SDK's default chain (web identity, container credentials, or profile " + profile() +
			" of the shared config)",
		advice: "the provider was asked for fresh credentials and those were refused too: check that its role or key may use the bucket",
	}
	if cache, ok := cfg.Credentials.(*aws.CredentialsCache); ok {
		cs.invalidate = cache.Invalidate
	}
	return cs, nil
}

// profileSource reads profile of the shared credentials file path: plain
// keys (re-read when the file changes), or a credential_process (run
// again before its credentials expire).
func profileSource(ctx context.Context, path, profile, what string) (*credSource, error) {
	sc, err := loadProfile(ctx, path, profile)
	if err != nil {
		return nil, err
	}
	source := fmt.Sprintf("%s (profile %s)", what, profile)
	switch {
	case plainKeys(sc):
		f := &fileCredentials{path: path, profile: profile}
		if _, err := f.Retrieve(ctx); err != nil {
			return nil, err
		}
		return &credSource{provider: f, source: source, invalidate: f.invalidate,
			advice: "write the new key to " + path + " (re-read whenever it changes, no restart needed), and check that it may use the bucket"}, nil
	case sc.CredentialProcess != "" && sc.RoleARN == "":
		cache := aws.NewCredentialsCache(processcreds.NewProvider(sc.CredentialProcess))
		return &credSource{provider: cache, source: "the credential_process of " + source, invalidate: cache.Invalidate,
			advice: "the process was run again and its credentials were refused too: check what it returns and that the key may use the bucket"}, nil
	}
	return nil, fmt.Errorf("profile [%s] of %s has neither aws_access_key_id with aws_secret_access_key nor credential_process "+
		"(for web identity or container credentials leave store.credentials_file unset)", profile, path)
}

// plainKeys reports a profile that holds keys and nothing that derives
// others from them.
func plainKeys(sc config.SharedConfig) bool {
	return sc.Credentials.HasKeys() && sc.CredentialProcess == "" && sc.RoleARN == "" && sc.SSOSessionName == "" && sc.SSOStartURL == ""
}

// loadProfile reads one profile of a shared credentials file with the SDK's
// parser.
func loadProfile(ctx context.Context, path, profile string) (config.SharedConfig, error) {
	if _, err := os.Stat(path); err != nil {
		return config.SharedConfig{}, err
	}
	// The file is read as a credentials file ([name]) and as a config
	// file ([profile name]): both forms of a section name work.
	sc, err := config.LoadSharedConfigProfile(ctx, profile, func(o *config.LoadSharedConfigOptions) {
		o.CredentialsFiles = []string{path}
		o.ConfigFiles = []string{path}
	})
	var missing config.SharedConfigProfileNotExistError
	if errors.As(err, &missing) {
		return config.SharedConfig{}, fmt.Errorf("%s has no profile [%s]", path, profile)
	}
	if err != nil {
		return config.SharedConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// fileCredentials are the plain keys of one profile of a shared credentials
// file, read again whenever the file's modification time or size changes
// and after invalidate. While the file cannot be read or lacks the keys (a
// rewrite under way) the keys read last are kept.
type fileCredentials struct {
	path, profile string

	mu    sync.Mutex
	creds aws.Credentials
	have  bool
	stamp fileStamp
	stale bool
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Retrieve implements aws.CredentialsProvider: one stat per request, a
// read when the file changed.
func (f *fileCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	fi, statErr := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if statErr == nil && f.have && !f.stale && (fileStamp{fi.ModTime(), fi.Size()}) == f.stamp {
		return f.creds, nil
	}
	err := statErr
	var sc config.SharedConfig
	if err == nil {
		sc, err = loadProfile(ctx, f.path, f.profile)
	}
	if err == nil && !plainKeys(sc) {
		err = fmt.Errorf("profile [%s] of %s lacks aws_access_key_id or aws_secret_access_key", f.profile, f.path)
	}
	if err != nil {
		if f.have {
			return f.creds, nil
		}
		return aws.Credentials{}, err
	}
	f.creds = sc.Credentials
	f.creds.Source = "store credentials file " + f.path
	f.have, f.stale, f.stamp = true, false, fileStamp{fi.ModTime(), fi.Size()}
	return f.creds, nil
}

// invalidate makes the next Retrieve read the file whatever its stamp.
func (f *fileCredentials) invalidate() {
	f.mu.Lock()
	f.stale = true
	f.mu.Unlock()
}
