package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// validateCaddyfile provisions a config as `caddy validate` does, inside the test process.
func validateCaddyfile(t *testing.T, caddyfile string) error {
	t.Helper()
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	var cfg caddy.Config
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	cfg.Admin = &caddy.AdminConfig{Disabled: true}
	return caddy.Validate(&cfg)
}

// An async route's max_body above what the queue can store would answer every request near it
// 503, for ever: it is refused when the config is loaded.
func TestAsyncMaxBodyOverTheQueueLimitIsRefused(t *testing.T) {
	err := validateCaddyfile(t, gatewayConfig("bigasync", unusedUpstream, asyncRoute(unusedUpstream), "max_body 16MiB"))
	if err == nil || !strings.Contains(err.Error(), "max_body 16 MiB is too large for an async route") || !strings.Contains(err.Error(), "at most 7.0 MiB") {
		t.Fatalf("async route with max_body 16MiB: %v, want it refused with the bound", err)
	}
	if err := validateCaddyfile(t, gatewayConfig("bigasync", unusedUpstream, asyncRoute(unusedUpstream), "max_body 7MiB")); err != nil {
		t.Fatalf("async route with max_body 7MiB: %v", err)
	}
	if err := validateCaddyfile(t, gatewayConfig("bigsync", unusedUpstream, "max_body 16MiB")); err != nil {
		t.Fatalf("sync route with max_body 16MiB: %v", err)
	}
}

// At the largest max_body an async route takes, a body of that size is queued; with headers so
// large that the two no longer fit, the request is refused for good (413), not answered 503 for
// ever as if the ledger were down.
func TestAsyncRequestAtMaxBodyIsQueuedAndOneTooLargeIs413(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	cfg := gatewayConfig("maxbody", unusedUpstream, asyncRoute(up.Listener.Addr().String()), "max_body 7MiB")
	// Caddy's own limit on request headers is 16 KiB; an operator may raise it.
	cfg = strings.Replace(cfg, "grace_period 5s\n", "grace_period 5s\n\tservers {\n\t\tmax_header_size 2MiB\n\t}\n", 1)
	tester.InitServer(cfg, "caddyfile")
	body := func(version int) string {
		head := fmt.Sprintf(`{"type":"test","data":{"object":{"id":"obj_maxbody","updated":%d}},"pad":"`, version)
		return head + strings.Repeat("x", maxAsyncBody-len(head)-2) + `"}`
	}
	// Verifying and storing 7 MiB takes seconds under the race detector.
	client := &http.Client{Timeout: time.Minute}
	ev := hooktest.SignedEvent(t, "evt_maxbody_1", body(1), time.Now(), hooktest.Secret)
	hooktest.ExpectReply(t, "a body of max_body", send(t, client, ev), http.StatusAccepted, `"id":"evt_maxbody_1"`)

	ev = hooktest.SignedEvent(t, "evt_maxbody_2", body(2), time.Now(), hooktest.Secret)
	ev.Headers.Set("X-Padding", strings.Repeat("<", 1_500_000))
	hooktest.ExpectReply(t, "a body of max_body with 1.5 MB of headers", send(t, client, ev), http.StatusRequestEntityTooLarge, "too large to queue")
}

// Reaching max_pending is logged once, and accepting again once, however many requests are
// refused in between (docs/architecture.md: logged once per change of state).
func TestBacklogFullLoggedOncePerChange(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	d := &destination{name: dedupe.DefaultDestination, queue: "orders", cfg: deliver.Config{MaxPending: 5}}
	h := &Handler{Name: "orders", destinations: []*destination{d}, logger: zap.New(core)}
	for range 3 {
		h.noteFull(d, false)
	}
	for range 50 {
		h.noteFull(d, true)
	}
	h.noteFull(d, false)
	h.noteFull(d, false)
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+" "+e.Message)
	}
	want := []string{
		"warn backlog at max_pending: refusing new events (503) until deliveries catch up",
		"info backlog below max_pending: accepting events again",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("log lines %q, want %q", got, want)
	}
}

// At the bound each delivery lets one accept in before the next is refused again: the full
// state ends (one INFO) only once the backlog is a tenth below max_pending, not at the first
// accept, which at saturation logged a WARN and an INFO per delivery.
func TestBacklogFullEndsOnceDrainedATenth(t *testing.T) {
	pool, err := ledgerpool.Acquire(ledgerpool.BadgerTarget(t.TempDir()), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Detach() })
	core, logs := observer.New(zap.InfoLevel)
	d := &destination{name: dedupe.DefaultDestination, queue: "orders", cfg: deliver.Config{MaxPending: 10}}
	h := &Handler{Name: "orders", destinations: []*destination{d}, ledger: pool, logger: zap.New(core)}
	ctx := context.Background()
	for i := range 10 {
		id := fmt.Sprintf("evt_%d", i)
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/hooks", Body: []byte("{}")}
		if _, err := pool.Accept(ctx, dedupe.Claim{Namespace: "orders", ID: id}, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	h.noteFull(d, true)
	h.noteDrained(ctx) // backlog 10 of 10
	if n := logs.FilterMessageSnippet("accepting events again").Len(); n != 0 {
		t.Fatalf("%d INFO lines with the backlog still at max_pending", n)
	}
	leased, err := pool.Lease(ctx, "orders", time.Now(), 1, time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("lease: %d, %v", len(leased), err)
	}
	leased[0].State = dedupe.Delivered
	if err := pool.Update(ctx, leased[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	h.noteDrained(ctx) // backlog 9 of 10
	h.noteDrained(ctx)
	if n := logs.FilterMessageSnippet("accepting events again").Len(); n != 1 {
		t.Fatalf("%d INFO lines once the backlog is a tenth below max_pending, want 1", n)
	}
}

// A queued event keeps the provider's headers as they arrived, each value, but not
// Content-Length, which each delivery recomputes from the body; and it keeps a copy, which what
// later happens to the request's headers does not change.
func TestQueuedEventKeepsTheRequestHeadersButContentLength(t *testing.T) {
	var kept *dedupe.Event
	f := newRequestPathFixture(t, true, nil)
	f.h.ledger = &instantStore{accepted: func(ev *dedupe.Event) { kept = ev }}
	header := f.header.Clone()
	header.Set("Content-Length", fmt.Sprint(len(f.body)))
	header["Accept"] = []string{"application/json", "text/plain"}
	header["X-Empty"] = nil
	f.serveSigned(t, header, f.body, http.StatusAccepted)
	if kept == nil {
		t.Fatal("no event was accepted")
	}
	want := header.Clone()
	delete(want, "Content-Length")
	if !reflect.DeepEqual(kept.Header, want) {
		t.Errorf("queued headers %v, want %v", kept.Header, want)
	}
	header["Accept"][0] = "changed"
	header.Set("Webhook-Id", "changed")
	if kept.Header["Accept"][0] != "application/json" || kept.Header.Get("Webhook-Id") == "changed" {
		t.Errorf("the queued headers changed with the request's: %v", kept.Header)
	}
}

// However many headers a request carries, and values each, a queued event keeps them as
// Header.Clone would, nil and empty values apart, but Content-Length; and its values are its
// own: what is added to one of its headers overwrites neither another's nor the request's.
func TestQueuedEventKeepsEveryValueOfManyHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 2))
	for i := range 500 {
		in := http.Header{}
		for j := range rng.IntN(80) {
			name := fmt.Sprintf("X-H%d", j)
			switch j % 9 {
			case 0:
				name = "Content-Length"
			case 1:
				name = strings.ToLower(name) // as set by hand, not canonical: kept
			}
			switch rng.IntN(4) {
			case 0:
				in[name] = nil
			case 1:
				in[name] = []string{}
			default:
				for range 1 + rng.IntN(5) {
					in[name] = append(in[name], fmt.Sprint(rng.Int()))
				}
			}
		}
		before := in.Clone()
		want := in.Clone()
		delete(want, "Content-Length")
		h := &Handler{keepSignedURL: i%2 == 0}
		got := h.storedHeader(in)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d headers stored as %v, want %v", len(in), got, want)
		}
		for name := range got {
			got[name] = append(got[name], "added")
		}
		for name, values := range got {
			if values[len(values)-1] != "added" || !slices.Equal(values[:len(values)-1], want[name]) {
				t.Fatalf("header %s holds %q after one value was added to each, want %q and it", name, values, want[name])
			}
		}
		if !reflect.DeepEqual(in, before) {
			t.Fatalf("the request's headers became %v once the stored ones were added to, want %v", in, before)
		}
	}
}
