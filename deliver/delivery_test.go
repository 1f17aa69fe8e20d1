package deliver

import (
	"bytes"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// deliverOne queues ev, starts a deliverer with cfg and waits until ev reaches a final state.
func deliverOne(t *testing.T, cfg Config, ev *dedupe.Event) dedupe.Event {
	t.Helper()
	got, _ := deliverOneIn(t, cfg, ev)
	return got
}

// deliverOneIn is deliverOne that also returns the outbox, for the event's history.
func deliverOneIn(t *testing.T, cfg Config, ev *dedupe.Event) (dedupe.Event, *fakeOutbox) {
	t.Helper()
	fake := newFakeOutbox()
	fake.add(ev)
	startDeliverer(t, fake, cfg)
	var got dedupe.Event
	waitFor(t, 5*time.Second, "the event to reach a final state", func() bool {
		got = fake.event(testNamespace, ev.ID)
		return got.State != dedupe.Pending
	})
	return got, fake
}

func TestForwardsTheEventUnchangedPlusOurHeaders(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL+"/base")
	body := []byte("{\"id\":\"evt_1\",\"binary\":\"\x00\xff\"}")
	ev := &dedupe.Event{
		Namespace: testNamespace, ID: "evt_1", Method: http.MethodPut, URI: "/hooks/x?a=1&b=%2F",
		Header: http.Header{
			"Content-Type":        {"application/json"},
			"User-Agent":          {"Stripe/1.0"},
			"X-Multi":             {"one", "two"},
			"Connection":          {"X-Conn-Listed"},
			"X-Conn-Listed":       {"hop"},
			"Keep-Alive":          {"timeout=5"},
			"Proxy-Authorization": {"Basic eDp5"},
			"Te":                  {"trailers"},
			"Trailer":             {"X-T"},
			"Upgrade":             {"h2c"},
			"Content-Length":      {"999"},
			"Hookgate-Event-Id":   {"spoofed"},
			"Hookgate-Whatever":   {"spoofed"},
			"Hookgate_Verified":   {"spoofed"},
			"hookgate.attempt":    {"spoofed"},
		},
		Body: body, Scheme: "stripe",
	}
	got := deliverOne(t, cfg, ev)
	if got.State != dedupe.Delivered || got.Attempts != 1 || got.LastStatus != 200 || got.LastError != "" {
		t.Fatalf("event = %s after %d attempts (status %d, %q), want delivered after 1", got.State, got.Attempts, got.LastStatus, got.LastError)
	}

	reqs := up.received()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	req := reqs[0]
	if req.Method != http.MethodPut || req.RequestURI != "/base/hooks/x?a=1&b=%2F" || !bytes.Equal(req.Body, body) {
		t.Errorf("upstream got %s %s %q; want PUT /base/hooks/x?a=1&b=%%2F %q", req.Method, req.RequestURI, req.Body, body)
	}
	wantHeader := http.Header{
		"Content-Type":      {"application/json"},
		"User-Agent":        {"Stripe/1.0"},
		"X-Multi":           {"one", "two"},
		"Content-Length":    {strconv.Itoa(len(body))},
		"Hookgate-Event-Id": {"evt_1"},
		"Hookgate-Attempt":  {"1"},
		"Hookgate-Verified": {"stripe"},
	}
	for name, values := range wantHeader {
		if !slices.Equal(req.Header[name], values) {
			t.Errorf("upstream header %s = %q, want %q", name, req.Header[name], values)
		}
	}
	for name := range req.Header {
		if _, expected := wantHeader[name]; !expected {
			t.Errorf("upstream got header %s: %q, which it should not", name, req.Header[name])
		}
	}
}

func TestAddsNoUserAgentOrAcceptEncodingOfItsOwn(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	got := deliverOne(t, testConfig(t, up.URL), testEvent("evt_1", "{}"))
	if got.State != dedupe.Delivered {
		t.Fatalf("event %s, want delivered", got.State)
	}
	h := up.received()[0].Header
	if h.Get("User-Agent") != "" || h.Get("Accept-Encoding") != "" {
		t.Errorf("upstream got User-Agent %q, Accept-Encoding %q; the provider sent neither", h.Get("User-Agent"), h.Get("Accept-Encoding"))
	}
}

// The upstream's answers are read, not only closed, so one kept-alive connection carries the
// attempts one after another, rather than a new connection (and TLS handshake) for each.
func TestAnswersAreReadSoTheConnectionIsReused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns := make(map[string]bool)
	up := newUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		_, _ = w.Write(bytes.Repeat([]byte("a"), 4<<10)) // an answer with a body the deliverer ignores
	})
	cfg := testConfig(t, up.URL)
	cfg.Workers = 1
	out := newFakeOutbox()
	const events = 10
	for i := range events {
		out.add(testEvent("evt_"+strconv.Itoa(i), "{}"))
	}
	startDeliverer(t, out, cfg)
	waitFor(t, 10*time.Second, "every event delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	mu.Lock()
	defer mu.Unlock()
	// One, or two when an attempt starts before the last answer's connection is back in the pool.
	if len(conns) > 2 {
		t.Errorf("%d attempts, one at a time, used %d connections, want one kept alive", events, len(conns))
	}
}

// A target with user info (http://user:pass@app) logs in with Basic auth, unless the provider
// sent an Authorization of its own, which is the event's and forwarded as it came.
func TestTargetUserInfoIsSentAsBasicAuth(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, strings.Replace(up.URL, "http://", "http://hook:s3cret@", 1))
	deliverOne(t, cfg, testEvent("evt_1", "{}"))
	withOwn := testEvent("evt_2", "{}")
	withOwn.Header = http.Header{"Authorization": {"Bearer provider"}}
	deliverOne(t, cfg, withOwn)
	reqs := up.received()
	if len(reqs) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(reqs))
	}
	if user, password, ok := (&http.Request{Header: reqs[0].Header}).BasicAuth(); !ok || user != "hook" || password != "s3cret" {
		t.Errorf("upstream got Authorization %q, want Basic auth as hook:s3cret", reqs[0].Header.Get("Authorization"))
	}
	if got := reqs[1].Header.Values("Authorization"); !slices.Equal(got, []string{"Bearer provider"}) {
		t.Errorf("upstream got Authorization %q, want the provider's own, %q", got, "Bearer provider")
	}
}

func TestServerErrorIsRetried(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	got := deliverOne(t, testConfig(t, up.URL), testEvent("evt_1", "{}"))
	if got.State != dedupe.Delivered || got.Attempts != 2 || got.LastStatus != 200 || got.LastError != "" {
		t.Fatalf("event = %+v, want delivered on attempt 2", got)
	}
	var attempts []string
	for _, r := range up.received() {
		attempts = append(attempts, r.Header.Get("Hookgate-Attempt"))
	}
	if !slices.Equal(attempts, []string{"1", "2"}) {
		t.Errorf("Hookgate-Attempt headers = %q, want [1 2]", attempts)
	}
}

func TestOtherClientErrorsAreDeadAtOnce(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusBadRequest, http.StatusFound} {
		up := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(status)
		})
		got := deliverOne(t, testConfig(t, up.URL), testEvent("evt_1", "{}"))
		want := "upstream answered " + strconv.Itoa(status) + " " + http.StatusText(status) + ": not retried"
		if got.State != dedupe.Dead || got.Attempts != 1 || got.LastStatus != status || got.LastError != want {
			t.Errorf("after %d: event = %s, %d attempts, status %d, %q; want dead after 1 attempt, not retried",
				status, got.State, got.Attempts, got.LastStatus, got.LastError)
		}
		if n := up.count(); n != 1 {
			t.Errorf("after %d: upstream got %d requests, want 1 (no redirect followed, no retry)", status, n)
		}
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	cfg := testConfig(t, up.URL)
	cfg.MaxAttempts = 3
	got := deliverOne(t, cfg, testEvent("evt_1", "{}"))
	if got.State != dedupe.Dead || got.Attempts != 3 || got.LastStatus != 500 ||
		got.LastError != "upstream answered 500 Internal Server Error; gave up after 3 attempts" {
		t.Errorf("event = %s, %d attempts, status %d, %q; want dead after 3 attempts with 500",
			got.State, got.Attempts, got.LastStatus, got.LastError)
	}
	time.Sleep(100 * time.Millisecond)
	if n := up.count(); n != 3 {
		t.Errorf("upstream got %d requests, want exactly 3", n)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	got := deliverOne(t, testConfig(t, up.URL), testEvent("evt_1", "{}"))
	reqs := up.received()
	if got.State != dedupe.Delivered || len(reqs) != 2 {
		t.Fatalf("event %s after %d requests, want delivered after 2", got.State, len(reqs))
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 950*time.Millisecond {
		t.Errorf("retried %v after a 429 with Retry-After: 1, want at least 1s (the schedule says 20ms)", gap)
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	cfg := testConfig(t, up.URL)
	cfg.RetryAfterCap = 50 * time.Millisecond
	got, fake := deliverOneIn(t, cfg, testEvent("evt_1", "{}"))
	reqs := up.received()
	if got.State != dedupe.Delivered || len(reqs) != 2 {
		t.Fatalf("event %s after %d requests, want delivered after 2", got.State, len(reqs))
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 45*time.Millisecond || gap > 900*time.Millisecond {
		t.Errorf("retried %v after Retry-After: 3600 capped at 50ms, want about 50ms", gap)
	}
	first := fake.history("evt_1")[0]
	if first.State != dedupe.Pending || first.NextAttempt.Sub(first.UpdatedAt) != 50*time.Millisecond {
		t.Errorf("after the 503: %s, retry scheduled %v after the attempt; want pending, the 50ms cap",
			first.State, first.NextAttempt.Sub(first.UpdatedAt))
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	t.Parallel()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	listener.Close()
	cfg := testConfig(t, "http://"+addr)
	cfg.MaxAttempts = 2
	got := deliverOne(t, cfg, testEvent("evt_1", "{}"))
	if got.State != dedupe.Dead || got.Attempts != 2 || got.LastStatus != 0 ||
		!strings.HasPrefix(got.LastError, "upstream unreachable: ") || !strings.Contains(got.LastError, "refused") {
		t.Errorf("event = %s, %d attempts, status %d, %q; want dead after 2 unreachable attempts",
			got.State, got.Attempts, got.LastStatus, got.LastError)
	}
}

func TestTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(n int, _ http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sleepOrGone(r, 3*time.Second)
		}
	})
	cfg := testConfig(t, up.URL)
	// Short against the first answer's 3 s, and long enough for the second to be answered in
	// on a loaded machine.
	cfg.Timeout = 500 * time.Millisecond
	started := time.Now()
	got, fake := deliverOneIn(t, cfg, testEvent("evt_1", "{}"))
	if got.State != dedupe.Delivered || got.Attempts != 2 {
		t.Fatalf("event = %s after %d attempts, want delivered on attempt 2", got.State, got.Attempts)
	}
	if first := fake.history("evt_1")[0]; first.LastError != "upstream did not answer within 500ms" || first.LastStatus != 0 {
		t.Errorf("first attempt recorded status %d, %q; want 0, a timeout in words", first.LastStatus, first.LastError)
	}
	if took := time.Since(started); took > 2500*time.Millisecond {
		t.Errorf("took %v; the 500ms timeout did not cut the first attempt short", took)
	}
}

func TestSupersededEventIsNotSent(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	fake := newFakeOutbox()
	fake.setDelivered(testNamespace, "cus_1", 5)
	fake.setDelivered(testNamespace, "cus_2", 5)
	older := testEvent("older", "{}")
	older.Entity, older.Version = "cus_1", 3
	newer := testEvent("newer", "{}")
	newer.Entity, newer.Version = "cus_2", 6
	fake.add(older)
	fake.add(newer)
	startDeliverer(t, fake, testConfig(t, up.URL))
	waitFor(t, 5*time.Second, "both events final", func() bool {
		return fake.count(testNamespace, dedupe.Pending) == 0
	})
	if got := fake.event(testNamespace, "older"); got.State != dedupe.Superseded || got.Attempts != 0 ||
		!strings.Contains(got.LastError, "version 5") {
		t.Errorf("older event = %s, %d attempts, %q; want superseded by version 5, never attempted", got.State, got.Attempts, got.LastError)
	}
	if got := fake.event(testNamespace, "newer"); got.State != dedupe.Delivered {
		t.Errorf("newer event = %s, want delivered", got.State)
	}
	for _, r := range up.received() {
		if r.Header.Get("Hookgate-Event-Id") == "older" {
			t.Error("the superseded event reached the upstream")
		}
	}
}

func TestUnforwardableEventIsDead(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	ev := testEvent("evt_1", "{}")
	ev.URI = "no-slash"
	got := deliverOne(t, testConfig(t, up.URL), ev)
	if got.State != dedupe.Dead || !strings.Contains(got.LastError, `URI "no-slash" cannot be forwarded`) {
		t.Errorf("event = %s, %q; want dead because its URI cannot be forwarded", got.State, got.LastError)
	}
	if n := up.count(); n != 0 {
		t.Errorf("upstream got %d requests, want none", n)
	}
}
