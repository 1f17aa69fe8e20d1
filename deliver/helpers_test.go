package deliver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookgate/hookgate/dedupe"
)

const testNamespace = "ns"

// testConfig delivers to target quickly: short schedule, no jitter, no pause unless a test
// asks for one.
func testConfig(t testing.TB, target string) Config {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("parse target %q: %v", target, err)
	}
	return Config{
		Target:      u,
		MaxAttempts: 5,
		Timeout:     2 * time.Second,
		Workers:     4,
		Schedule:    []time.Duration{20 * time.Millisecond, 40 * time.Millisecond},
		Jitter:      JitterNone,
		PauseAfter:  1000,
	}
}

// startDeliverer starts a deliverer that the test's cleanup stops.
func startDeliverer(t *testing.T, out *fakeOutbox, cfg Config) *Deliverer {
	t.Helper()
	return startDelivererWithLogger(t, out, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
}

func startDelivererWithLogger(t *testing.T, out dedupe.Outbox, cfg Config, logger *zap.Logger) *Deliverer {
	t.Helper()
	return run(t, New(out, testNamespace, cfg, logger))
}

// run starts d; the test's cleanup stops it.
func run(t *testing.T, d *Deliverer) *Deliverer {
	t.Helper()
	d.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return d
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// receivedRequest is what the upstream saw of one request.
type receivedRequest struct {
	Method     string
	RequestURI string
	Header     http.Header
	Body       []byte
	At         time.Time
}

// upstream is a test server on 127.0.0.1 that records every request and how many were in
// flight at once. respond answers request number n (1-based).
type upstream struct {
	*httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu          sync.Mutex
	requests    []receivedRequest
	inFlight    int
	maxInFlight int
}

func newUpstream(t testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{respond: respond}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

// ok answers every request 200.
func ok(int, http.ResponseWriter, *http.Request) {}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.requests = append(u.requests, receivedRequest{
		Method: r.Method, RequestURI: r.RequestURI, Header: r.Header.Clone(), Body: body, At: time.Now(),
	})
	n := len(u.requests)
	u.inFlight++
	u.maxInFlight = max(u.maxInFlight, u.inFlight)
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inFlight--
		u.mu.Unlock()
	}()
	u.respond(n, w, r)
}

func (u *upstream) received() []receivedRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]receivedRequest(nil), u.requests...)
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

func (u *upstream) peakInFlight() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.maxInFlight
}

func (u *upstream) resetPeak() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.maxInFlight = u.inFlight
}

// sleepOrGone waits for d or until the request is gone, whichever is first.
func sleepOrGone(r *http.Request, d time.Duration) {
	select {
	case <-time.After(d):
	case <-r.Context().Done():
	}
}

// newBlockingUpstream holds every request until release is closed (or the request is cancelled).
func newBlockingUpstream(t *testing.T) (*upstream, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	return up, release
}
