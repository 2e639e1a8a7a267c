package s3store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
)

// Retries. Every call is retried with exponential backoff (full jitter,
// from retryBase, doubling up to maxBackoff) on throttling, other 5xx
// answers and connection errors, for as long as its context allows: the
// context's deadline is the retry budget, not a number of attempts. The
// driver gives a checkpoint at stop the task's stop deadline (kill_timeout
// less a tenth) and a container job's commit role its own bound, so a
// store that throttles for 30 s loses nothing when kill_timeout allows
// more. A call whose context has no deadline retries for defaultBudget.
// The SDK's client-side retry quota is off (it would turn a long SlowDown
// into immediate failures).
//
// A 503 is throttling whatever its body: S3 answers a HEAD, which has no
// body and so no error code, with a bare 503 when it means SlowDown.
// Throttling backs off from throttleBase, other errors from retryBase.
// A call that gives up says how long it tried, how many times, why it
// stopped and the last answer.
type retryPolicy struct {
	retryBase, throttleBase, maxBackoff time.Duration
	defaultBudget                       time.Duration
}

// defaultRetryPolicy is the policy of every Backend (tests scale it down).
var defaultRetryPolicy = retryPolicy{
	retryBase:     100 * time.Millisecond,
	throttleBase:  time.Second,
	maxBackoff:    5 * time.Second,
	defaultBudget: 30 * time.Second,
}

// isThrottle reports an answer that asks the client to slow down.
func isThrottle(err error) bool {
	switch httpStatus(err) {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return true
	}
	switch errorCode(err) {
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException":
		return true
	}
	return false
}

// isAuthRefused reports a 403 that says, or may say, the credentials
// themselves are wrong (an unknown or revoked key, a wrong secret), not
// that they may not do what was asked (AccessDenied): a HEAD's 403 has no
// body, so no code (the SDK makes it "Forbidden").
func isAuthRefused(err error) bool {
	switch errorCode(err) {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return true
	case "", "Forbidden":
		return httpStatus(err) == http.StatusForbidden
	}
	return false
}

// errRefusedAgain ends the retries of a call whose credentials were
// refused again after the source was read afresh.
var errRefusedAgain = errors.New("refused again after the credentials were read afresh")

// newRetryer returns the SDK retryer of policy p; a request whose
// credentials are refused makes creds read them afresh and is tried once
// more.
func newRetryer(p retryPolicy, creds *credSource) aws.Retryer {
	std := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxBackoff = p.maxBackoff
		o.RateLimiter = ratelimit.None
		o.Throttles = append(o.Throttles, retry.IsErrorThrottleFunc(func(err error) aws.Ternary {
			if isThrottle(err) {
				return aws.TrueTernary
			}
			return aws.UnknownTernary
		}))
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
			base := p.retryBase
			if isThrottle(err) {
				base = p.throttleBase
			}
			d := min(p.maxBackoff, base<<min(attempt-1, 30))
			return time.Duration(rand.Int64N(int64(d)) + 1), nil
		})
	})
	return budgetRetryer{RetryerV2: std, policy: p, creds: creds}
}

// budgetRetryer retries without a limit on attempts: the call's context
// (or, without a deadline, policy.defaultBudget) bounds it.
type budgetRetryer struct {
	aws.RetryerV2
	policy retryPolicy
	creds  *credSource
}

// IsErrorRetryable is the standard retryer's answer, and yes for refused
// credentials (GetRetryToken allows one such retry per call).
func (r budgetRetryer) IsErrorRetryable(err error) bool {
	if r.creds != nil && isAuthRefused(err) {
		return true
	}
	return r.RetryerV2.IsErrorRetryable(err)
}

// MaxAttempts is 0: no limit (the SDK's retry middleware reads it so).
func (budgetRetryer) MaxAttempts() int { return 0 }

// errBudgetSpent ends the retries of a call without a deadline.
var errBudgetSpent = errors.New("retry budget for calls without a deadline")

// GetRetryToken records the failed attempt and refuses another once a call
// without a deadline has retried for policy.defaultBudget.
func (r budgetRetryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	st, ok := ctx.Value(retryStateKey{}).(*retryState)
	if isAuthRefused(opErr) {
		if !ok || st.refreshed {
			return nil, errRefusedAgain
		}
		st.refreshed = true
		st.retries++
		st.last = opErr
		r.creds.refresh()
		return func(error) error { return nil }, nil
	}
	if ok {
		st.retries++
		st.last = opErr
		if _, has := ctx.Deadline(); !has && time.Since(st.start) >= r.policy.defaultBudget {
			return nil, fmt.Errorf("%w (%s) spent", errBudgetSpent, r.policy.defaultBudget)
		}
	}
	return r.RetryerV2.GetRetryToken(ctx, opErr)
}

// retryState is one call's record of its retries.
type retryState struct {
	start     time.Time
	retries   int
	last      error
	refreshed bool // credentials were read afresh after a refusal
}

type retryStateKey struct{}

// addRetryState gives each call a retryState and, when it fails after
// retrying, says so in its error (the SDK's own error for a retry cut short
// by the context is only "canceled, context deadline exceeded"); refused
// credentials are named by their source (creds).
func addRetryState(creds *credSource) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("CaravanRetryState",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
				middleware.InitializeOutput, middleware.Metadata, error) {
				rs := &retryState{start: time.Now()}
				out, md, err := next.HandleInitialize(context.WithValue(ctx, retryStateKey{}, rs), in)
				switch {
				case err != nil && isAuthRefused(err):
					err = refused(creds, rs, err)
				case err != nil && rs.retries > 0 && (ctx.Err() != nil || errors.Is(err, errBudgetSpent)):
					err = gaveUp(ctx, rs, err)
				}
				return out, md, err
			}), middleware.After)
	}
}

// refused explains err, a 403 for the credentials themselves: where they
// came from and what to do. The result matches err.
func refused(creds *credSource, rs *retryState, err error) error {
	again := ""
	if rs.refreshed {
		again = ", also after they were read afresh"
	}
	source, advice := "the store's configuration", "check the store's credentials"
	if creds != nil {
		source, advice = creds.source, creds.advice
	}
	// The SDK joins errRefusedAgain to the answer with a newline: give
	// the answer alone.
	if rs.last != nil && errors.Is(err, errRefusedAgain) {
		err = rs.last
	}
	return fmt.Errorf("the store refused the credentials from %s (HTTP %d %s)%s; %s: %w",
		source, httpStatus(err), errorCode(err), again, advice, err)
}

// gaveUp explains err, the end of a call that retried until its context
// ended or its budget was spent. The result matches err's context error, or
// errBudgetSpent, and the last answer's.
func gaveUp(ctx context.Context, rs *retryState, err error) error {
	last := "failed: " + rs.last.Error()
	if isThrottle(rs.last) {
		last = fmt.Sprintf("throttled (HTTP %d %s)", httpStatus(rs.last), errorCode(rs.last))
	}
	took := time.Since(rs.start).Round(time.Millisecond)
	if ctx.Err() != nil {
		return fmt.Errorf("gave up after %d attempts over %s, at the end of the caller's time budget; the store %s: %w",
			rs.retries+1, took, last, err)
	}
	// The SDK joins errBudgetSpent to the last answer with a newline: say
	// it on one line.
	return fmt.Errorf("gave up after %d attempts over %s, at the %w; the store %s: %w",
		rs.retries+1, took, errBudgetSpent, last, rs.last)
}
