package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/paralleltest"
	"github.com/hookgate/hookgate/verify"
)

// The integration tests share caddytest's one in-process Caddy (admin localhost:2999), so none of
// them runs in parallel. Each test uses its own route name, so their ledger keys never meet.
// Tests that share nothing with it or with each other (their own Caddy processes, Redis servers,
// ports, directories and browser; no t.Setenv, no process-wide counts such as goroutines) call
// t.Parallel: go test runs them after the others, four at a time (TestMain): more fought over
// the two cores of the machine the suite is tuned on, and fewer left them waiting in turn.

const (
	testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	gateURL    = "http://localhost:9080/hooks/test"
)

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
	os.Setenv("HOOKGATE_TEST_SECRET", testSecret)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// upstream stands in for the app behind the gateway: it counts what reaches it by event ID.
type upstream struct {
	*httptest.Server
	status  atomic.Int32
	block   chan struct{} // when non-nil, requests wait on it
	mu      sync.Mutex
	seen    map[string]int
	headers []http.Header
	bodies  []string
}

func newUpstream(t *testing.T) *upstream {
	u := newUnstartedUpstream(t)
	u.Start()
	return u
}

func newUnstartedUpstream(t *testing.T) *upstream {
	u := &upstream{seen: map[string]int{}}
	u.status.Store(http.StatusOK)
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen[r.Header.Get("Hookgate-Event-Id")]++
		u.headers = append(u.headers, r.Header.Clone())
		u.bodies = append(u.bodies, string(body))
		block := u.block
		u.mu.Unlock()
		if block != nil {
			<-block
		}
		w.WriteHeader(int(u.status.Load()))
		fmt.Fprint(w, "upstream says hi")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) count(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[id]
}

func (u *upstream) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.headers)
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

func startGateway(t *testing.T, name string, up *upstream, extra ...string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig(name, up.Listener.Addr().String(), extra...), "caddyfile")
	return tester
}

// event is one webhook as the provider would send it.
type event struct {
	id      string
	body    string
	ts      time.Time
	secret  string
	headers http.Header // after signing; tests may tamper with it
}

func newEvent(t testing.TB, id, entity string, version int) *event {
	body := fmt.Sprintf(`{"type":"test","data":{"object":{"id":%q,"updated":%d}}}`, entity, version)
	return signedEvent(t, id, body, time.Now(), testSecret)
}

func signedEvent(t testing.TB, id, body string, ts time.Time, secret string) *event {
	t.Helper()
	cfg, _ := verify.Preset("standard")
	hdr, err := verify.Sign(cfg, secret, id, ts, []byte(body))
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return &event{id: id, body: body, ts: ts, secret: secret, headers: hdr}
}

type reply struct {
	status int
	body   string
	header http.Header
}

// send sends ev once the last config load has settled (see awaitLoadSettled). Only a connection
// that could not be made is tried again: then the request never left.
func send(t testing.TB, client *http.Client, ev *event) reply {
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
			t.Fatalf("sending %s: %v", ev.id, err)
		}
		return got
	}
}

func trySend(client *http.Client, ev *event) (reply, error) {
	return trySendTo(client, gateURL, ev)
}

func trySendTo(client *http.Client, url string, ev *event) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(ev.body))
	if err != nil {
		return reply{}, err
	}
	for k, v := range ev.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: string(body), header: resp.Header}, nil
}

func expectReply(t testing.TB, step string, got reply, status int, bodyContains string) {
	t.Helper()
	if got.status != status || !strings.Contains(got.body, bodyContains) {
		t.Fatalf("%s: got %d %q, want %d containing %q", step, got.status, got.body, status, bodyContains)
	}
}

func TestPassesVerifiedEventOnceWithHeaders(t *testing.T) {
	up := newUpstream(t)
	tester := startGateway(t, "once", up)
	ev := newEvent(t, "evt_once_1", "obj_once", 1)
	ev.headers.Set("Hookgate-Verified", "forged")
	ev.headers.Set("Hookgate-Event-Id", "evt_forged")

	expectReply(t, "first delivery", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
	expectReply(t, "provider retry", send(t, tester.Client, ev), http.StatusOK, `{"received":true,"duplicate":true}`)

	if n := up.count("evt_once_1"); n != 1 {
		t.Fatalf("upstream saw the event %d times, want 1", n)
	}
	got := up.headers[0]
	if got.Get("Hookgate-Verified") != "standard" || got.Get("Hookgate-Event-Id") != "evt_once_1" {
		t.Fatalf("upstream headers: Hookgate-Verified=%q Hookgate-Event-Id=%q", got.Get("Hookgate-Verified"), got.Get("Hookgate-Event-Id"))
	}
	if up.bodies[0] != ev.body {
		t.Fatalf("upstream got body %q, want the signed bytes %q", up.bodies[0], ev.body)
	}
}

func TestUpstreamFailureReleasesClaim(t *testing.T) {
	up := newUpstream(t)
	tester := startGateway(t, "release", up)
	ev := newEvent(t, "evt_release_1", "obj_release", 1)

	up.status.Store(http.StatusInternalServerError)
	expectReply(t, "upstream fails", send(t, tester.Client, ev), http.StatusInternalServerError, "")
	up.status.Store(http.StatusOK)
	expectReply(t, "provider retry", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
	expectReply(t, "retry after success", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
	if n := up.count("evt_release_1"); n != 2 {
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
			up := newUpstream(t)
			tester := startGateway(t, fmt.Sprintf("refused_%d", status), up)
			ev := newEvent(t, fmt.Sprintf("evt_refused_%d", status), "obj_refused", 1)

			up.status.Store(int32(status))
			expectReply(t, "the app refuses the event", send(t, tester.Client, ev), status, "")
			up.status.Store(http.StatusOK) // fixed
			expectReply(t, "provider retry", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
			expectReply(t, "retry after success", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
			if n := up.count(ev.id); n != 2 {
				t.Fatalf("upstream saw the event %d times, want 2 (the refused try and the retry)", n)
			}
		})
	}
}

func TestUpstreamDownReleasesClaim(t *testing.T) {
	up := newUpstream(t)
	tester := startGateway(t, "down", up)
	up.Close() // connection refused: reverse_proxy answers 502 with an error
	ev := newEvent(t, "evt_down_1", "obj_down", 1)
	expectReply(t, "upstream down", send(t, tester.Client, ev), http.StatusBadGateway, "")

	up2 := newUpstream(t)
	tester.InitServer(gatewayConfig("down", up2.Listener.Addr().String()), "caddyfile")
	expectReply(t, "retry once the app is back", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
}

func TestOlderVersionIsStale(t *testing.T) {
	up := newUpstream(t)
	tester := startGateway(t, "stale", up)

	expectReply(t, "v2", send(t, tester.Client, newEvent(t, "evt_stale_v2", "obj_stale", 2)), http.StatusOK, "upstream says hi")
	expectReply(t, "v1 after v2", send(t, tester.Client, newEvent(t, "evt_stale_v1", "obj_stale", 1)), http.StatusOK, `{"received":true,"stale":true}`)
	expectReply(t, "v2 again, new id", send(t, tester.Client, newEvent(t, "evt_stale_v2b", "obj_stale", 2)), http.StatusOK, `"stale":true`)
	expectReply(t, "v3", send(t, tester.Client, newEvent(t, "evt_stale_v3", "obj_stale", 3)), http.StatusOK, "upstream says hi")
	if up.count("evt_stale_v1") != 0 || up.count("evt_stale_v2b") != 0 {
		t.Fatal("a stale event reached the upstream")
	}
}

func TestDuplicateWhileInFlightGets409(t *testing.T) {
	up := newUpstream(t)
	up.block = make(chan struct{})
	tester := startGateway(t, "inflight", up)
	ev := newEvent(t, "evt_inflight_1", "obj_inflight", 1)

	first := make(chan reply)
	go func() { first <- send(t, tester.Client, ev) }()
	for up.count("evt_inflight_1") == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	second := send(t, tester.Client, ev)
	expectReply(t, "duplicate while the first is in flight", second, http.StatusConflict, "still being processed")
	if second.header.Get("Retry-After") == "" {
		t.Fatal("409 without Retry-After")
	}
	close(up.block)
	expectReply(t, "first", <-first, http.StatusOK, "upstream says hi")
}

func TestRejectsBadInputAndRemembersNothing(t *testing.T) {
	up := newUpstream(t)
	tester := startGateway(t, "reject", up)
	now := time.Now()
	good := func(id string) *event { return newEvent(t, id, "obj_reject_"+id, 1) }

	cases := []struct {
		name   string
		ev     func(id string) *event
		status int
		reason string
	}{
		{"missing signature", func(id string) *event { e := good(id); e.headers.Del("Webhook-Signature"); return e }, 401, "signature"},
		{"garbled signature", func(id string) *event {
			e := good(id)
			e.headers.Set("Webhook-Signature", "v1,@@@not-base64@@@")
			return e
		}, 401, "signature"},
		{"wrong secret", func(id string) *event {
			return signedEvent(t, id, good(id).body, now, "whsec_"+"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
		}, 401, "signature"},
		{"timestamp too old", func(id string) *event { return signedEvent(t, id, good(id).body, now.Add(-10*time.Minute), testSecret) }, 401, "timestamp"},
		{"timestamp in the future", func(id string) *event { return signedEvent(t, id, good(id).body, now.Add(10*time.Minute), testSecret) }, 401, "timestamp"},
		{"timestamp not a number", func(id string) *event { e := good(id); e.headers.Set("Webhook-Timestamp", "yesterday"); return e }, 401, "timestamp"},
		{"body over max_body", func(id string) *event {
			return signedEvent(t, id, `{"data":{"object":{"id":"x","updated":1}},"pad":"`+strings.Repeat("a", 5000)+`"}`, now, testSecret)
		}, 413, "max_body"},
		{"missing event id", func(id string) *event { e := good(id); e.headers.Del("Webhook-Id"); return e }, 401, "id"},
		{"unparsable version", func(id string) *event {
			return signedEvent(t, id, `{"data":{"object":{"id":"obj","updated":"last tuesday"}}}`, now, testSecret)
		}, 400, "version"},
		{"missing version entity", func(id string) *event {
			return signedEvent(t, id, `{"data":{"object":{"updated":3}}}`, now, testSecret)
		}, 400, "entity"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("evt_reject_%d", i)
			bad := tc.ev(id)
			got := send(t, tester.Client, bad)
			expectReply(t, tc.name, got, tc.status, tc.reason)
			for _, secretish := range []string{testSecret, testSecret[len("whsec_"):], good(id).headers.Get("Webhook-Signature")[3:]} {
				if strings.Contains(got.body, secretish) {
					t.Fatalf("error body %q reveals a secret or the expected signature", got.body)
				}
			}
			if up.count(id) != 0 {
				t.Fatal("a rejected request reached the upstream")
			}
			// Nothing was recorded: the genuine event with the same ID still goes through.
			expectReply(t, "genuine event after the bad one", send(t, tester.Client, good(id)), http.StatusOK, "upstream says hi")
		})
	}
}

func TestSecretsFromFilePlaceholderAndRotation(t *testing.T) {
	up := newUpstream(t)
	file := storageDir + "/secret.txt"
	oldSecret := "whsec_" + "b2xkLXNlY3JldC1vbGQtc2VjcmV0LW9sZA=="
	if err := os.WriteFile(file, []byte(oldSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	tester := startGateway(t, "rotation", up, "secret {file."+file+"}")
	expectReply(t, "signed with the new secret", send(t, tester.Client, newEvent(t, "evt_rot_new", "obj_rot", 1)), http.StatusOK, "upstream says hi")
	oldBody := `{"data":{"object":{"id":"obj_rot","updated":2}}}`
	expectReply(t, "signed with the old secret", send(t, tester.Client, signedEvent(t, "evt_rot_old", oldBody, time.Now(), oldSecret)), http.StatusOK, "upstream says hi")
}

func TestPlaceholdersDescribeOutcome(t *testing.T) {
	up := newUpstream(t)
	tester := caddytest.NewTester(t)
	// Deferred (>) so the value is read when the response is written, after hookgate decided.
	cfg := strings.Replace(gatewayConfig("placeholders", up.Listener.Addr().String()), "\treverse_proxy",
		"\theader >Hookgate-Outcome {http.hookgate.outcome}\n\theader >Hookgate-Reason {http.hookgate.reason}\n\treverse_proxy", 1)
	tester.InitServer(cfg, "caddyfile")

	ev := newEvent(t, "evt_ph_1", "obj_ph", 1)
	for _, want := range []string{"accepted", "duplicate"} {
		if got := send(t, tester.Client, ev).header.Get("Hookgate-Outcome"); got != want {
			t.Fatalf("{http.hookgate.outcome} = %q, want %q", got, want)
		}
	}
	ev.headers.Set("Webhook-Signature", "v1,AAAA")
	got := send(t, tester.Client, ev)
	if got.header.Get("Hookgate-Outcome") != "rejected" || !strings.Contains(got.header.Get("Hookgate-Reason"), "signature") {
		t.Fatalf("rejected: outcome %q reason %q", got.header.Get("Hookgate-Outcome"), got.header.Get("Hookgate-Reason"))
	}
}

func TestUnsignedEventIDMissingIs400(t *testing.T) {
	up := newUpstream(t)
	tester := caddytest.NewTester(t)
	cfg := strings.Replace(gatewayConfig("github", up.Listener.Addr().String()), "preset  standard", "preset  github", 1)
	cfg = strings.Replace(cfg, "version json data.object.id json data.object.updated", "", 1)
	tester.InitServer(cfg, "caddyfile")

	gh, _ := verify.Preset("github")
	body := `{"action":"opened"}`
	hdr, err := verify.Sign(gh, testSecret, "", time.Now(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ev := &event{id: "", body: body, headers: hdr}
	expectReply(t, "no X-GitHub-Delivery", send(t, tester.Client, ev), http.StatusBadRequest, "event ID")

	ev.headers.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	expectReply(t, "with X-GitHub-Delivery", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
	expectReply(t, "redelivery", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
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
