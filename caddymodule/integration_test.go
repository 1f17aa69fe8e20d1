package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/paralleltest"
	"github.com/hookgate/hookgate/verify"
)

// The integration tests share caddytest's one in-process Caddy (admin localhost:2999), so none of
// them runs in parallel. Each test uses its own route name, so their ledger keys never meet.
// Tests that share nothing with it or with each other (their own Caddy processes, Redis servers,
// ports, directories and browser; no t.Setenv, no process-wide counts such as goroutines) call
// t.Parallel: go test runs them after the others, four at a time (TestMain): more fought over
// the two cores of the machine the suite is tuned on, and fewer left them waiting in turn.

// gateURL is the route of the sites gatewayConfig writes.
const gateURL = "http://localhost:9080/hooks/test"

var storageDir string

func TestMain(m *testing.M) {
	paralleltest.Default(4)
	// A load provisions the routes' ledgers (synced Badger opens): on a VM whose disk stalls it
	// can take longer than caddytest's 5 s, and the test then fails on a config that loads.
	caddytest.Default.LoadRequestTimeout = 30 * time.Second
	dir, err := os.MkdirTemp("", "hookgate-test-")
	if err != nil {
		panic(err)
	}
	storageDir = dir
	os.Setenv("HOOKGATE_TEST_SECRET", hooktest.Secret)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// gatewayConfig is a Caddyfile with one standard-preset route in front of upstreamAddr; extra lines go
// inside the hookgate block.
// testSite is the global options every caddytest gateway runs with, and the head of its site.
const testSite = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 5s
}
http://localhost:9080 {
	bind 127.0.0.1
`

func gatewayConfig(name, upstreamAddr string, extra ...string) string {
	return fmt.Sprintf(testSite+`	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    %s
		storage badger %s
		max_body 4KiB
		version json data.object.id json data.object.updated
		%s
	}
	reverse_proxy %s
}
`, name, storageDir, strings.Join(extra, "\n\t\t"), upstreamAddr)
}

func startGateway(t *testing.T, name string, up *hooktest.Upstream, extra ...string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig(name, up.Listener.Addr().String(), extra...), "caddyfile")
	return tester
}

// send sends ev once the last config load has settled (see awaitLoadSettled). Only a connection
// that could not be made is tried again: then the request never left.
func send(t testing.TB, client *http.Client, ev *hooktest.Event) hooktest.Reply {
	t.Helper()
	awaitLoadSettled(t, client)
	for tries := 1; ; tries++ {
		got, err := trySend(client, ev)
		var dial *net.OpError
		if err != nil && errors.As(err, &dial) && dial.Op == "dial" && tries < 20 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("sending %s: %v", ev.ID, err)
		}
		return got
	}
}

func trySend(client *http.Client, ev *hooktest.Event) (hooktest.Reply, error) {
	return hooktest.TrySendTo(client, gateURL, ev)
}

func TestPassesVerifiedEventOnceWithHeaders(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "once", up)
	ev := hooktest.NewEvent(t, "evt_once_1", "obj_once", 1)
	ev.Headers.Set("Hookgate-Verified", "forged")
	ev.Headers.Set("Hookgate-Event-Id", "evt_forged")

	hooktest.ExpectReply(t, "first delivery", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
	hooktest.ExpectReply(t, "provider retry", send(t, tester.Client, ev), http.StatusOK, `{"received":true,"duplicate":true}`)

	if n := up.Count("evt_once_1"); n != 1 {
		t.Fatalf("upstream saw the event %d times, want 1", n)
	}
	got := up.Headers[0]
	if got.Get("Hookgate-Verified") != "standard" || got.Get("Hookgate-Event-Id") != "evt_once_1" {
		t.Fatalf("upstream headers: Hookgate-Verified=%q Hookgate-Event-Id=%q", got.Get("Hookgate-Verified"), got.Get("Hookgate-Event-Id"))
	}
	if up.Bodies[0] != ev.Body {
		t.Fatalf("upstream got body %q, want the signed bytes %q", up.Bodies[0], ev.Body)
	}
}

func TestUpstreamFailureReleasesClaim(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "release", up)
	ev := hooktest.NewEvent(t, "evt_release_1", "obj_release", 1)

	up.Status.Store(http.StatusInternalServerError)
	hooktest.ExpectReply(t, "upstream fails", send(t, tester.Client, ev), http.StatusInternalServerError, "")
	up.Status.Store(http.StatusOK)
	hooktest.ExpectReply(t, "provider retry", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
	hooktest.ExpectReply(t, "retry after success", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
	if n := up.Count("evt_release_1"); n != 2 {
		t.Fatalf("upstream saw the event %d times, want 2 (the failed try and the retry)", n)
	}
}

// Only a 2xx from the app marks an event done. An app that refuses it (a 401 while it checks
// another secret or scheme, a 404 or a redirect during a deploy) or asks for a retry (408, 429)
// has not taken it: the claim is released, so the provider's retry of the same event is handed
// on again, once the app is fixed taken, and only then answered as a duplicate.
func TestAppRefusalIsNotADuplicate(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusFound, http.StatusRequestTimeout, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			up := hooktest.NewUpstream(t)
			tester := startGateway(t, fmt.Sprintf("refused_%d", status), up)
			ev := hooktest.NewEvent(t, fmt.Sprintf("evt_refused_%d", status), "obj_refused", 1)

			up.Status.Store(int32(status))
			hooktest.ExpectReply(t, "the app refuses the event", send(t, tester.Client, ev), status, "")
			up.Status.Store(http.StatusOK) // fixed
			hooktest.ExpectReply(t, "provider retry", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
			hooktest.ExpectReply(t, "retry after success", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
			if n := up.Count(ev.ID); n != 2 {
				t.Fatalf("upstream saw the event %d times, want 2 (the refused try and the retry)", n)
			}
		})
	}
}

func TestUpstreamDownReleasesClaim(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "down", up)
	up.Close() // connection refused: reverse_proxy answers 502 with an error
	ev := hooktest.NewEvent(t, "evt_down_1", "obj_down", 1)
	hooktest.ExpectReply(t, "upstream down", send(t, tester.Client, ev), http.StatusBadGateway, "")

	up2 := hooktest.NewUpstream(t)
	tester.InitServer(gatewayConfig("down", up2.Listener.Addr().String()), "caddyfile")
	hooktest.ExpectReply(t, "retry once the app is back", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
}

func TestOlderVersionIsStale(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "stale", up)

	hooktest.ExpectReply(t, "v2", send(t, tester.Client, hooktest.NewEvent(t, "evt_stale_v2", "obj_stale", 2)), http.StatusOK, "upstream says hi")
	hooktest.ExpectReply(t, "v1 after v2", send(t, tester.Client, hooktest.NewEvent(t, "evt_stale_v1", "obj_stale", 1)), http.StatusOK, `{"received":true,"stale":true}`)
	hooktest.ExpectReply(t, "v2 again, new id", send(t, tester.Client, hooktest.NewEvent(t, "evt_stale_v2b", "obj_stale", 2)), http.StatusOK, `"stale":true`)
	hooktest.ExpectReply(t, "v3", send(t, tester.Client, hooktest.NewEvent(t, "evt_stale_v3", "obj_stale", 3)), http.StatusOK, "upstream says hi")
	if up.Count("evt_stale_v1") != 0 || up.Count("evt_stale_v2b") != 0 {
		t.Fatal("a stale event reached the upstream")
	}
}

func TestDuplicateWhileInFlightGets409(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Block = make(chan struct{})
	tester := startGateway(t, "inflight", up)
	ev := hooktest.NewEvent(t, "evt_inflight_1", "obj_inflight", 1)

	first := make(chan hooktest.Reply)
	go func() { first <- send(t, tester.Client, ev) }()
	for up.Count("evt_inflight_1") == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	second := send(t, tester.Client, ev)
	hooktest.ExpectReply(t, "duplicate while the first is in flight", second, http.StatusConflict, "still being processed")
	if second.Header.Get("Retry-After") == "" {
		t.Fatal("409 without Retry-After")
	}
	close(up.Block)
	hooktest.ExpectReply(t, "first", <-first, http.StatusOK, "upstream says hi")
}

func TestRejectsBadInputAndRemembersNothing(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "reject", up)
	now := time.Now()
	good := func(id string) *hooktest.Event { return hooktest.NewEvent(t, id, "obj_reject_"+id, 1) }

	cases := []struct {
		name   string
		ev     func(id string) *hooktest.Event
		status int
		reason string
	}{
		{"missing signature", func(id string) *hooktest.Event { e := good(id); e.Headers.Del("Webhook-Signature"); return e }, 401, "signature"},
		{"garbled signature", func(id string) *hooktest.Event {
			e := good(id)
			e.Headers.Set("Webhook-Signature", "v1,@@@not-base64@@@")
			return e
		}, 401, "signature"},
		{"wrong secret", func(id string) *hooktest.Event {
			return hooktest.SignedEvent(t, id, good(id).Body, now, "whsec_"+"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
		}, 401, "signature"},
		{"timestamp too old", func(id string) *hooktest.Event {
			return hooktest.SignedEvent(t, id, good(id).Body, now.Add(-10*time.Minute), hooktest.Secret)
		}, 401, "timestamp"},
		{"timestamp in the future", func(id string) *hooktest.Event {
			return hooktest.SignedEvent(t, id, good(id).Body, now.Add(10*time.Minute), hooktest.Secret)
		}, 401, "timestamp"},
		{"timestamp not a number", func(id string) *hooktest.Event {
			e := good(id)
			e.Headers.Set("Webhook-Timestamp", "yesterday")
			return e
		}, 401, "timestamp"},
		{"body over max_body", func(id string) *hooktest.Event {
			return hooktest.SignedEvent(t, id, `{"data":{"object":{"id":"x","updated":1}},"pad":"`+strings.Repeat("a", 5000)+`"}`, now, hooktest.Secret)
		}, 413, "max_body"},
		{"missing event id", func(id string) *hooktest.Event { e := good(id); e.Headers.Del("Webhook-Id"); return e }, 401, "id"},
		{"unparsable version", func(id string) *hooktest.Event {
			return hooktest.SignedEvent(t, id, `{"data":{"object":{"id":"obj","updated":"last tuesday"}}}`, now, hooktest.Secret)
		}, 400, "version"},
		{"missing version entity", func(id string) *hooktest.Event {
			return hooktest.SignedEvent(t, id, `{"data":{"object":{"updated":3}}}`, now, hooktest.Secret)
		}, 400, "entity"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("evt_reject_%d", i)
			bad := tc.ev(id)
			got := send(t, tester.Client, bad)
			hooktest.ExpectReply(t, tc.name, got, tc.status, tc.reason)
			for _, secretish := range []string{hooktest.Secret, hooktest.Secret[len("whsec_"):], good(id).Headers.Get("Webhook-Signature")[3:]} {
				if strings.Contains(got.Body, secretish) {
					t.Fatalf("error body %q reveals a secret or the expected signature", got.Body)
				}
			}
			if up.Count(id) != 0 {
				t.Fatal("a rejected request reached the upstream")
			}
			// Nothing was recorded: the genuine event with the same ID still goes through.
			hooktest.ExpectReply(t, "genuine event after the bad one", send(t, tester.Client, good(id)), http.StatusOK, "upstream says hi")
		})
	}
}

func TestSecretsFromFilePlaceholderAndRotation(t *testing.T) {
	up := hooktest.NewUpstream(t)
	file := storageDir + "/secret.txt"
	oldSecret := "whsec_" + "b2xkLXNlY3JldC1vbGQtc2VjcmV0LW9sZA=="
	if err := os.WriteFile(file, []byte(oldSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	tester := startGateway(t, "rotation", up, "secret {file."+file+"}")
	hooktest.ExpectReply(t, "signed with the new secret", send(t, tester.Client, hooktest.NewEvent(t, "evt_rot_new", "obj_rot", 1)), http.StatusOK, "upstream says hi")
	oldBody := `{"data":{"object":{"id":"obj_rot","updated":2}}}`
	hooktest.ExpectReply(t, "signed with the old secret", send(t, tester.Client, hooktest.SignedEvent(t, "evt_rot_old", oldBody, time.Now(), oldSecret)), http.StatusOK, "upstream says hi")
}

func TestPlaceholdersDescribeOutcome(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	// Deferred (>) so the value is read when the response is written, after hookgate decided.
	cfg := strings.Replace(gatewayConfig("placeholders", up.Listener.Addr().String()), "\treverse_proxy",
		"\theader >Hookgate-Outcome {http.hookgate.outcome}\n\theader >Hookgate-Reason {http.hookgate.reason}\n\treverse_proxy", 1)
	tester.InitServer(cfg, "caddyfile")

	ev := hooktest.NewEvent(t, "evt_ph_1", "obj_ph", 1)
	for _, want := range []string{"accepted", "duplicate"} {
		if got := send(t, tester.Client, ev).Header.Get("Hookgate-Outcome"); got != want {
			t.Fatalf("{http.hookgate.outcome} = %q, want %q", got, want)
		}
	}
	ev.Headers.Set("Webhook-Signature", "v1,AAAA")
	got := send(t, tester.Client, ev)
	if got.Header.Get("Hookgate-Outcome") != "rejected" || !strings.Contains(got.Header.Get("Hookgate-Reason"), "signature") {
		t.Fatalf("rejected: outcome %q reason %q", got.Header.Get("Hookgate-Outcome"), got.Header.Get("Hookgate-Reason"))
	}
}

func TestUnsignedEventIDMissingIs400(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	cfg := strings.Replace(gatewayConfig("github", up.Listener.Addr().String()), "preset  standard", "preset  github", 1)
	cfg = strings.Replace(cfg, "version json data.object.id json data.object.updated", "", 1)
	tester.InitServer(cfg, "caddyfile")

	gh, _ := verify.Preset("github")
	body := `{"action":"opened"}`
	hdr, err := verify.Sign(gh, hooktest.Secret, "", time.Now(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ev := &hooktest.Event{ID: "", Body: body, Headers: hdr}
	hooktest.ExpectReply(t, "no X-GitHub-Delivery", send(t, tester.Client, ev), http.StatusBadRequest, "event ID")

	ev.Headers.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	hooktest.ExpectReply(t, "with X-GitHub-Delivery", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
	hooktest.ExpectReply(t, "redelivery", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
}

// claimSettleCounter is a ledger that takes every event at once and counts how claims are settled.
type claimSettleCounter struct {
	instantStore
	mu            sync.Mutex
	done, release int
}

func (s *claimSettleCounter) Done(context.Context, dedupe.Claim, time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done++
	return nil
}

func (s *claimSettleCounter) Release(context.Context, dedupe.Claim) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release++
	return nil
}

// event is handed on again.
func TestSyncNextHandlerWritingNothingMarksTheEventDone(t *testing.T) {
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	f := newRequestPathFixture(t, false, next)
	ledger := &claimSettleCounter{}
	f.h.ledger = ledger
	r := f.request()
	rec := httptest.NewRecorder()
	if err := f.h.ServeHTTP(rec, r, next); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("the provider was answered %d, want net/http's implicit 200", rec.Code)
	}
	if ledger.done != 1 || ledger.release != 0 {
		t.Fatalf("the provider was answered 200, and the claim was settled done %d, released %d times; want done once", ledger.done, ledger.release)
	}
}
