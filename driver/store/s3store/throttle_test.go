package s3store

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/internal/s3fault"
)

// fakeS3 is the least of S3 these tests need, in process: PUT (with
// If-None-Match: *), HEAD and GET of objects, path style. It checks no
// signature; refuse, when set, answers 403 with the code it returns for a
// request signed with that access key (none for "").
type fakeS3 struct {
	mu      sync.Mutex
	objects map[string][]byte
	refuse  func(accessKey string) string
	// keys records the access key of every request, in order.
	keys []string
}

// accessKeyOf is the access key a SigV4 request is signed with.
func accessKeyOf(r *http.Request) string {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	ak, _, _ := strings.Cut(cred, "/")
	return ak
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ak := accessKeyOf(r)
	f.keys = append(f.keys, ak)
	if f.refuse != nil {
		if code := f.refuse(ak); code != "" {
			w.WriteHeader(http.StatusForbidden)
			if r.Method != http.MethodHead { // a HEAD's answer has no body
				_, _ = io.WriteString(w, "<Error><Code>"+code+"</Code><Message>refused</Message></Error>")
			}
			return
		}
	}
	b, ok := f.objects[r.URL.Path]
	switch r.Method {
	case http.MethodPut:
		if ok && r.Header.Get("If-None-Match") == "*" {
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.objects[r.URL.Path] = data
		w.Header().Set("ETag", `"`+strconv.Itoa(len(data))+`"`)
	case http.MethodHead, http.MethodGet:
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			if r.Method == http.MethodGet {
				_, _ = io.WriteString(w, `<Error><Code>NoSuchKey</Code></Error>`)
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}

// throttledBackend returns a Backend on a fake S3 server behind an
// s3fault proxy, retrying by policy p.
func throttledBackend(t *testing.T, p retryPolicy) (*Backend, *s3fault.Proxy) {
	t.Helper()
	srv := httptest.NewServer(&fakeS3{objects: map[string][]byte{}})
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	must.NoError(t, err)
	proxy := s3fault.New(u, hclog.NewNullLogger())
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	b, err := newBackendPolicy(Config{Endpoint: strings.TrimPrefix(front.URL, "http://"), Bucket: "throttled",
		PathStyle: true, Region: "us-east-1", AccessKeyID: testAK, SecretAccessKey: testSK}, p)
	must.NoError(t, err)
	return b, proxy
}

// testRetryPolicy is the default policy scaled down 10 times, so that 3 s
// of SlowDown here stands for 30 s with the default policy.
var testRetryPolicy = retryPolicy{
	retryBase:     10 * time.Millisecond,
	throttleBase:  100 * time.Millisecond,
	maxBackoff:    500 * time.Millisecond,
	defaultBudget: 12 * time.Second,
}

// putChunk does what a commit does for one new chunk: HEAD, then PUT.
func putChunk(ctx context.Context, b *Backend, name string, data []byte) error {
	if _, err := b.Stat(ctx, name); !errors.Is(err, store.ErrObjectNotFound) {
		return err
	}
	return b.Put(ctx, name, data, false)
}

// TestSlowDownWithinBudget throttles every request (HEAD and PUT) until the
// one HEAD has been throttled 11 times (about 4 s at this policy's scale,
// 40 s at the default one; counted, not timed, so a loaded machine cannot
// make it pass or fail) while a chunk is stored with a context allowing
// 15 s: the calls retry until the throttling ends and succeed. The old
// retryer gave up after a fixed 10 attempts (7 to 9 s of throttling, as a
// HEAD's bare 503 was backed off as an ordinary error, from 50 ms), which
// this fails whatever the backoff.
func TestSlowDownWithinBudget(t *testing.T) {
	b, proxy := throttledBackend(t, testRetryPolicy)
	var heads atomic.Int64
	var lift sync.Once
	proxy.Inject(s3fault.Fault{Kind: s3fault.SlowDown, Match: func(r *http.Request) bool {
		if r.Method == http.MethodHead && heads.Add(1) == 11 {
			lift.Do(func() { go proxy.Clear() })
		}
		return true
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	must.NoError(t, putChunk(ctx, b, "chunks/ab/abcd", []byte("chunk")))
	must.Greater(t, 10, heads.Load(), must.Sprint("one HEAD was throttled more often than the old 10 attempts allowed"))
	fi, err := b.Stat(ctx, "chunks/ab/abcd")
	must.NoError(t, err)
	must.Eq(t, 5, fi.Size)
}

// TestSlowDownPastBudget throttles for longer than the context allows: the
// call fails when the context ends, not later, with an error that says it
// was throttled (a HEAD's bare 503 counts as throttling) and why it
// stopped, and still matches the context's error.
func TestSlowDownPastBudget(t *testing.T) {
	b, proxy := throttledBackend(t, testRetryPolicy)
	proxy.Inject(s3fault.Fault{Kind: s3fault.SlowDown})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := putChunk(ctx, b, "chunks/ab/abcd", []byte("chunk"))
	took := time.Since(start)
	must.Error(t, err)
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	must.Less(t, 1500*time.Millisecond, took, must.Sprint("gave up late"))
	must.ErrorIs(t, err, context.DeadlineExceeded)
	must.StrContains(t, err.Error(), "stat chunks/ab/abcd")
	must.StrContains(t, err.Error(), "throttled (HTTP 503 ServiceUnavailable)") // a HEAD's 503 has no body
	must.StrContains(t, err.Error(), "the end of the caller's time budget")
}

// TestSlowDownWithoutDeadline: a call whose context has no deadline
// retries for the policy's default budget, then fails saying so.
func TestSlowDownWithoutDeadline(t *testing.T) {
	p := testRetryPolicy
	p.defaultBudget = 800 * time.Millisecond
	b, proxy := throttledBackend(t, p)
	proxy.Inject(s3fault.Fault{Kind: s3fault.SlowDown, Match: func(r *http.Request) bool { return r.Method == http.MethodPut }})
	start := time.Now()
	err := b.Put(context.Background(), "chunks/ab/abcd", []byte("chunk"), false)
	must.Error(t, err)
	t.Log(err)
	must.Less(t, 2*time.Second, time.Since(start))
	must.ErrorIs(t, err, errBudgetSpent)
	must.StrContains(t, err.Error(), "throttled (HTTP 503 SlowDown)")
	must.StrNotContains(t, err.Error(), "\n")
}

// TestIsThrottle classifies answers, HEAD's bodiless 503 included.
func TestIsThrottle(t *testing.T) {
	b, proxy := throttledBackend(t, testRetryPolicy)
	proxy.Inject(s3fault.Fault{Kind: s3fault.SlowDown, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// One attempt: the HEAD's 503, without a body, is the error.
	_, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: b.key("x")},
		func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	must.Error(t, err)
	must.Eq(t, http.StatusServiceUnavailable, httpStatus(err))
	must.True(t, isThrottle(err))
	must.False(t, isThrottle(errors.New("plain")))
}
