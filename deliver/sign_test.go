package deliver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// A Sign hook is called on every attempt, on the request being sent, with the event it carries:
// what it sets reaches the upstream, and each retry gets its own call, at the attempt's time.
func TestSignIsCalledOnEveryAttemptAtItsTime(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	cfg := testConfig(t, up.URL)
	var mu sync.Mutex
	var calls []time.Time
	cfg.Sign = func(req *http.Request, ev *dedupe.Event) error {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		calls = append(calls, now)
		req.Header.Set("X-Signed-At", strconv.FormatInt(now.UnixNano(), 10))
		req.Header.Set("X-Signed-Event", ev.ID+" "+req.Header.Get("Hookgate-Attempt"))
		req.Header.Set("X-Provider-Signature", "fresh")
		return nil
	}
	ev := &dedupe.Event{
		Namespace: testNamespace, ID: "evt_sign", Method: http.MethodPost, URI: "/hook",
		Header: http.Header{"X-Provider-Signature": {"stale"}}, Body: []byte("{}"), Scheme: "stripe",
	}
	got := deliverOne(t, cfg, ev)
	if got.State != dedupe.Delivered || got.Attempts != 3 {
		t.Fatalf("event = %s after %d attempts (%q), want delivered after 3", got.State, got.Attempts, got.LastError)
	}
	reqs := up.received()
	if len(reqs) != 3 || len(calls) != 3 {
		t.Fatalf("upstream got %d requests, Sign was called %d times; want 3 and 3", len(reqs), len(calls))
	}
	for i, req := range reqs {
		signedAt, err := strconv.ParseInt(req.Header.Get("X-Signed-At"), 10, 64)
		if err != nil || signedAt != calls[i].UnixNano() {
			t.Errorf("attempt %d carried X-Signed-At %q, want the call's time %d", i+1, req.Header.Get("X-Signed-At"), calls[i].UnixNano())
		}
		if want := "evt_sign " + strconv.Itoa(i+1); req.Header.Get("X-Signed-Event") != want {
			t.Errorf("attempt %d: Sign saw %q, want %q (the event and the request being sent)", i+1, req.Header.Get("X-Signed-Event"), want)
		}
		if sig := req.Header.Values("X-Provider-Signature"); len(sig) != 1 || sig[0] != "fresh" {
			t.Errorf("attempt %d carried signature %q, want only the one Sign set", i+1, sig)
		}
		if i > 0 && !calls[i].After(reqs[i-1].At) {
			t.Errorf("attempt %d was signed at %v, before attempt %d reached the upstream (%v): not fresh", i+1, calls[i], i, reqs[i-1].At)
		}
	}
	if ev.Header.Get("X-Provider-Signature") != "stale" {
		t.Errorf("Sign changed the stored event's header: %q", ev.Header.Get("X-Provider-Signature"))
	}
}

// A request that cannot be signed is not sent: the event becomes a dead letter that says why.
func TestSignFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Sign = func(*http.Request, *dedupe.Event) error { return errors.New("the URL the provider signed is unknown") }
	ev := &dedupe.Event{Namespace: testNamespace, ID: "evt_unsignable", Method: http.MethodPost, URI: "/hook", Body: []byte("{}")}
	got := deliverOne(t, cfg, ev)
	want := "signing the request: the URL the provider signed is unknown: not retried"
	if got.State != dedupe.Dead || got.Attempts != 1 || got.LastError != want {
		t.Fatalf("event = %s after %d attempts (%q), want dead after 1 with %q", got.State, got.Attempts, got.LastError, want)
	}
	if n := up.count(); n != 0 {
		t.Errorf("upstream got %d requests, want none", n)
	}
}

// Reloads that swap the Sign hook (resign on, off, another secret) while workers deliver lose
// and duplicate nothing, and every request carries the signature of exactly one hook in force
// (run under -race: the swap and the workers' reads of it do not race).
func TestConfigureSwapsSignWhileWorkersSign(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) { sleepOrGone(r, time.Millisecond) })
	fake := newFakeOutbox()
	const events = 120
	for i := range events {
		fake.add(testEvent(fmt.Sprintf("evt_%03d", i), "{}"))
	}
	signWith := func(name string) func(*http.Request, *dedupe.Event) error {
		return func(req *http.Request, ev *dedupe.Event) error {
			req.Header.Set("X-Signature", name+":"+ev.ID)
			return nil
		}
	}
	configs := []Config{testConfig(t, up.URL), testConfig(t, up.URL), testConfig(t, up.URL)}
	configs[0].Sign, configs[1].Sign = signWith("a"), signWith("b") // configs[2]: resign off
	d := startDeliverer(t, fake, configs[0])
	for i := 0; fake.count(testNamespace, dedupe.Delivered) < events; i++ {
		if i > 2000 {
			t.Fatalf("only %d of %d delivered", fake.count(testNamespace, dedupe.Delivered), events)
		}
		d.Configure(configs[i%3])
		time.Sleep(2 * time.Millisecond)
	}
	seen := make(map[string]int)
	for _, r := range up.received() {
		id := r.Header.Get("Hookgate-Event-Id")
		seen[id]++
		if sig := r.Header.Values("X-Signature"); len(sig) > 1 || len(sig) == 1 && sig[0] != "a:"+id && sig[0] != "b:"+id {
			t.Errorf("%s carried signatures %q, want one hook's for it, or none", id, sig)
		}
	}
	for i := range events {
		if id := fmt.Sprintf("evt_%03d", i); seen[id] != 1 {
			t.Errorf("%s reached the upstream %d times, want exactly once", id, seen[id])
		}
	}
}
