package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// drainLimit is how much of an answer's body is read (and discarded) so its connection can be
// reused; a longer body costs the connection instead.
const drainLimit = 64 << 10

// verdict is what an attempt means for its event.
type verdict int

const (
	// delivered: the upstream answered 2xx.
	delivered verdict = iota
	// retryable: 408, 429, 5xx, a timeout or a connection error; worth trying again later.
	retryable
	// rejected: any other answer, or an event that cannot be sent at all; never retried.
	rejected
	// abandoned: the attempt was cancelled because the deliverer stopped; nothing is known.
	abandoned
)

// attemptResult is the outcome of one attempt, in the terms the outbox records.
type attemptResult struct {
	verdict verdict
	// status is the upstream's status code, 0 if it did not answer.
	status int
	// problem says in words what went wrong ("" when delivered); never a body.
	problem string
	// retryAfter is the upstream's Retry-After, when hasRetryAfter.
	retryAfter    time.Duration
	hasRetryAfter bool
}

// newClient makes the HTTP client one Deliverer shares among its workers: it keeps enough idle
// connections for every worker and adds no Accept-Encoding of its own. Attempts go to its
// Transport directly, as reverse_proxy does, so no redirect is followed (a 3xx is the upstream's
// answer) and no copy of the request's headers is made for one.
func newClient(workers int) *http.Client {
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true, // send Accept-Encoding only if the provider did
		MaxIdleConnsPerHost:   workers,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: transport}
}

// attempt sends ev once, as attempt number (1-based), and classifies the outcome. stopCtx ends
// only when the deliverer gives up on its attempts; each one is bounded by cfg.Timeout.
func attempt(stopCtx context.Context, client *http.Client, cfg Config, ev *dedupe.Event, number int) attemptResult {
	defer cfg.attempted(time.Now())
	ctx, cancel := context.WithTimeout(stopCtx, cfg.Timeout)
	defer cancel()

	req, err := newAttemptRequest(ctx, cfg.Target, ev, number)
	if err == nil && cfg.Sign != nil {
		if err = cfg.Sign(req, ev); err != nil {
			err = fmt.Errorf("signing the request: %w", err)
		}
	}
	if err != nil {
		return attemptResult{verdict: rejected, problem: err.Error() + ": not retried"}
	}
	resp, err := client.Transport.RoundTrip(req)
	if err != nil {
		return failedExchange(stopCtx, ctx, cfg.Timeout, err)
	}
	// Read a little so the connection is reused; the body itself is never recorded.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	_ = resp.Body.Close()
	return classifyStatus(resp, time.Now())
}

// failedExchange classifies a request that got no answer.
func failedExchange(stopCtx, attemptCtx context.Context, timeout time.Duration, err error) attemptResult {
	if stopCtx.Err() != nil {
		return attemptResult{verdict: abandoned, problem: "deliverer stopped during the attempt"}
	}
	var netErr net.Error
	if errors.Is(attemptCtx.Err(), context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return attemptResult{verdict: retryable, problem: fmt.Sprintf("upstream did not answer within %v", timeout)}
	}
	// The *url.Error repeats the method and URL; the cause alone says what happened.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return attemptResult{verdict: retryable, problem: "upstream unreachable: " + err.Error()}
}

// classifyStatus turns the upstream's answer into a verdict: 2xx delivered; 408, 429 and 5xx
// retryable (with any Retry-After); anything else rejected.
func classifyStatus(resp *http.Response, now time.Time) attemptResult {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return attemptResult{verdict: delivered, status: code}
	}
	answered := strings.TrimSpace(fmt.Sprintf("upstream answered %d %s", code, http.StatusText(code)))
	switch {
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || (code >= 500 && code < 600):
		result := attemptResult{verdict: retryable, status: code, problem: answered}
		result.retryAfter, result.hasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
		return result
	default:
		return attemptResult{verdict: rejected, status: code, problem: answered + ": not retried"}
	}
}
