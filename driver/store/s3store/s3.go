package s3store

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/caravan-nomad/caravan/driver/store"
)

// Backend is the S3 store.Backend. Create it with New.
type Backend struct {
	client *s3.Client
	creds  *credSource
	bucket string
	prefix string // "" or ending in "/"
	desc   string
}

var _ store.Backend = (*Backend)(nil)
var _ store.UploadCleaner = (*Backend)(nil)
var _ store.Swapper = (*Backend)(nil)
var _ store.Toucher = (*Backend)(nil)
var _ store.DigestPutter = (*Backend)(nil)

// New validates c, connects, and checks at once that the endpoint answers,
// the bucket exists and the credentials may write below the prefix (a probe
// object is written and deleted), so a misconfigured store fails when the
// plugin starts, with an error naming the field, not at the first
// checkpoint.
func New(ctx context.Context, c Config) (store.Backend, error) {
	b, err := newBackend(c)
	if err != nil {
		return nil, err
	}
	if err := b.check(ctx, c); err != nil {
		return nil, err
	}
	return b, nil
}

// newBackend builds the client without contacting the server.
func newBackend(c Config) (*Backend, error) { return newBackendPolicy(c, defaultRetryPolicy) }

// newBackendPolicy is newBackend retrying by policy p (see retry.go).
func newBackendPolicy(c Config, p retryPolicy) (*Backend, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	creds, err := c.credentialSource(context.Background())
	if err != nil {
		return nil, err
	}
	httpClient, err := newHTTPClient(c)
	if err != nil {
		return nil, err
	}
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	scheme := "http"
	if c.TLS {
		scheme = "https"
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: creds.provider,
		HTTPClient:  httpClient,
		Retryer:     func() aws.Retryer { return newRetryer(p, creds) },
		// The store verifies every chunk by its SHA-256 itself; the SDK's
		// default CRC trailers are not understood by every S3-compatible
		// server.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(scheme + "://" + c.Endpoint)
		o.UsePathStyle = c.PathStyle
		o.APIOptions = append(o.APIOptions, addRetryState(creds))
	})
	prefix := strings.Trim(c.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &Backend{client: client, creds: creds, bucket: c.Bucket, prefix: prefix, desc: c.String()}, nil
}

func newHTTPClient(c Config) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = 2 * time.Minute
	if c.CACertFile != "" {
		pem, err := os.ReadFile(c.CACertFile)
		if err != nil {
			return nil, fieldErr("ca_cert", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fieldErr("ca_cert", "%s holds no PEM certificate", c.CACertFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}

// check is New's start check.
func (b *Backend) check(ctx context.Context, c Config) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := b.creds.provider.Retrieve(ctx); err != nil {
		return fieldErr("credentials_file", "no credentials from %s: %v", b.creds.source, err)
	}
	few := func(o *s3.Options) { o.RetryMaxAttempts = 2 }
	// A listing below the prefix, not HeadBucket: credentials scoped to
	// one prefix (the README's per-team policy) may not head the bucket.
	_, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.bucket), Prefix: aws.String(b.prefix), MaxKeys: aws.Int32(1)}, few)
	if err != nil {
		return classifyStart(err, c, b.creds)
	}
	probe := b.prefix + "leases/probe-start"
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(probe), Body: bytes.NewReader(nil)}, few)
	if err != nil {
		return classifyStart(err, c, b.creds)
	}
	if _, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(probe)}, few); err != nil {
		return classifyStart(err, c, b.creds)
	}
	return nil
}

// classifyStart names the field a failed start check points at.
func classifyStart(err error, c Config, creds *credSource) error {
	status := httpStatus(err)
	code := errorCode(err)
	switch {
	case status == 0:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, fieldErr("endpoint", "%s does not answer: %v", c.Endpoint, err))
	case status == http.StatusNotFound || code == "NoSuchBucket":
		return fieldErr("bucket", "bucket %q does not exist on %s", c.Bucket, c.Endpoint)
	case status == http.StatusForbidden || status == http.StatusUnauthorized ||
		code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied":
		return fieldErr("credentials_file", "the credentials from %s are refused for bucket %q prefix %q (HTTP %d %s)",
			creds.source, c.Bucket, c.Prefix, status, code)
	case status == http.StatusMovedPermanently || code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect":
		return fieldErr("region", "%q is not the bucket's region (HTTP %d %s)", c.Region, status, code)
	default:
		return fieldErr("endpoint", "%s answered HTTP %d %s: %v", c.Endpoint, status, code, err)
	}
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isNotFound reports a missing object or key.
func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf) || httpStatus(err) == http.StatusNotFound && errorCode(err) != "NoSuchBucket"
}

// wrap turns SDK errors into the store's: a missing object is
// store.ErrObjectNotFound; an unreachable server or a bucket gone is also
// store.ErrUnavailable.
func (b *Backend) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if isNotFound(err) {
		return fmt.Errorf("%s %s: %w", op, name, store.ErrObjectNotFound)
	}
	var ne net.Error
	if httpStatus(err) == 0 && (errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)) || errorCode(err) == "NoSuchBucket" {
		return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, op, name, err)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}

func (b *Backend) key(name string) *string { return aws.String(b.prefix + name) }

// Put implements store.Backend; ifAbsent sends If-None-Match: *.
func (b *Backend) Put(ctx context.Context, name string, data []byte, ifAbsent bool) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           b.key(name),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := b.client.PutObject(ctx, in)
	if ifAbsent && preconditionFailed(err) {
		return fmt.Errorf("put %s: %w", name, store.ErrObjectExists)
	}
	return b.wrap("put", name, err)
}

// preconditionFailed reports whether err is a conditional request's
// failure: 412, or 409 ConditionalRequestConflict (S3's answer to a
// conditional write racing another on the same key).
func preconditionFailed(err error) bool {
	return httpStatus(err) == http.StatusPreconditionFailed || errorCode(err) == "PreconditionFailed" ||
		httpStatus(err) == http.StatusConflict && errorCode(err) == "ConditionalRequestConflict"
}

// PutIfMatch implements store.Swapper: If-Match: etag, or If-None-Match: *
// when etag is "".
func (b *Backend) PutIfMatch(ctx context.Context, name string, data []byte, etag string) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           b.key(name),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := b.client.PutObject(ctx, in)
	switch {
	case err == nil:
		return aws.ToString(out.ETag), nil
	case preconditionFailed(err) && etag == "":
		return "", fmt.Errorf("put %s: %w", name, store.ErrObjectExists)
	case preconditionFailed(err):
		return "", fmt.Errorf("put %s: %w", name, store.ErrObjectChanged)
	}
	return "", b.wrap("put", name, err)
}

// DeleteIfMatch implements store.Swapper with If-Match on DeleteObject.
func (b *Backend) DeleteIfMatch(ctx context.Context, name, etag string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: b.key(name), IfMatch: aws.String(etag)})
	if preconditionFailed(err) {
		return fmt.Errorf("delete %s: %w", name, store.ErrObjectChanged)
	}
	if err != nil && errors.Is(b.wrap("delete", name, err), store.ErrObjectNotFound) {
		return nil
	}
	return b.wrap("delete", name, err)
}

// Touch implements store.Toucher: the object is copied onto itself with
// its metadata replaced (S3 refuses a copy onto itself that changes
// nothing), which sets its Last-Modified to the server's present time and
// sends no contents.
func (b *Backend) Touch(ctx context.Context, name string) error {
	_, err := b.client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            aws.String(b.bucket),
		Key:               b.key(name),
		CopySource:        aws.String(url.PathEscape(b.bucket) + "/" + strings.ReplaceAll(url.PathEscape(b.prefix+name), "%2F", "/")),
		MetadataDirective: types.MetadataDirectiveReplace,
		Metadata:          map[string]string{"caravan-touched": "1"},
	})
	return b.wrap("touch", name, err)
}

// PutSHA256 implements store.DigestPutter: the body's SHA-256 goes into
// the request's signature as given (x-amz-content-sha256), instead of the
// SDK hashing the body again (over plain HTTP) or sending it unsigned
// (over TLS). The server checks the body against it. ifAbsent sends
// If-None-Match: *.
//
// Chunk PUTs do not ask the server for 100-continue (the SDK does for
// bodies of 2 MiB and more): waiting for it costs a round trip per chunk,
// and would only spare the body of a refused create, which the store
// rarely sends (it looks chunks up first unless they prove new) and
// SeaweedFS reads in full before it answers all the same.
func (b *Backend) PutSHA256(ctx context.Context, name string, data []byte, sum [32]byte, ifAbsent bool) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           b.key(name),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := b.client.PutObject(ctx, in, withPayloadSHA256(hex.EncodeToString(sum[:])), noContinue)
	if ifAbsent && preconditionFailed(err) {
		return fmt.Errorf("put %s: %w", name, store.ErrObjectExists)
	}
	return b.wrap("put", name, err)
}

// noContinue keeps the SDK from asking for 100-continue.
func noContinue(o *s3.Options) { o.ContinueHeaderThresholdBytes = -1 }

// withPayloadSHA256 sets a request's SigV4 payload hash to sum before the
// signer's own payload-hash step, which then keeps it.
func withPayloadSHA256(sum string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("CaravanPayloadSHA256",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
					middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
				}), "ComputePayloadHash", middleware.Before)
		})
	}
}

// Get implements store.Backend.
func (b *Backend) Get(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: b.key(name)})
	if err != nil {
		return nil, 0, b.wrap("get", name, err)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	return out.Body, size, nil
}

// Stat implements store.Backend.
func (b *Backend) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: b.key(name)})
	if err != nil {
		return store.ObjectInfo{}, b.wrap("stat", name, err)
	}
	fi := store.ObjectInfo{Name: name}
	if out.ContentLength != nil {
		fi.Size = *out.ContentLength
	}
	if out.LastModified != nil {
		fi.Modified = *out.LastModified
	}
	fi.ETag = aws.ToString(out.ETag)
	return fi, nil
}

// List implements store.Backend.
func (b *Backend) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: b.key(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return b.wrap("list", prefix, err)
		}
		for _, o := range page.Contents {
			fi := store.ObjectInfo{Name: strings.TrimPrefix(aws.ToString(o.Key), b.prefix), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag)}
			if o.LastModified != nil {
				fi.Modified = *o.LastModified
			}
			if err := fn(fi); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements store.Backend.
func (b *Backend) Delete(ctx context.Context, name string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: b.key(name)})
	if err != nil && errors.Is(b.wrap("delete", name, err), store.ErrObjectNotFound) {
		return nil
	}
	return b.wrap("delete", name, err)
}

// AbortStaleUploads implements store.UploadCleaner: it aborts the multipart
// uploads below the prefix initiated before cutoff (left by a crashed
// writer; the store's own chunks are single PUTs, but a tool copying into
// the bucket may not be).
func (b *Backend) AbortStaleUploads(ctx context.Context, cutoff time.Time) (int, error) {
	n := 0
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(b.bucket), Prefix: aws.String(b.prefix)}
	for {
		out, err := b.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return n, b.wrap("list uploads", b.prefix, err)
		}
		for _, u := range out.Uploads {
			if u.Initiated != nil && !u.Initiated.Before(cutoff) {
				continue
			}
			_, err := b.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
				Bucket: aws.String(b.bucket), Key: u.Key, UploadId: u.UploadId,
			})
			if err != nil && !isNotFound(err) && errorCode(err) != "NoSuchUpload" {
				return n, b.wrap("abort upload", aws.ToString(u.Key), err)
			}
			n++
		}
		if !aws.ToBool(out.IsTruncated) {
			return n, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// String implements store.Backend (no credentials).
func (b *Backend) String() string { return b.desc }
