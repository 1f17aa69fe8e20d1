package caddymodule

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// openRequest writes a request's head and the first sent bytes of its body to a new connection,
// and leaves the rest of the body unsent: a slow sender, or an attacker holding memory.
func openRequest(t *testing.T, addr, path string, hdr http.Header, contentLength int, sent []byte) net.Conn {
	t.Helper()
	// A connection made while the previous config's server still listens beside the new one
	// may reach the one shutting down, which closes it unanswered.
	awaitLoadSettled(t, http.DefaultClient)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, addr, contentLength)
	for name, values := range hdr {
		for _, v := range values {
			fmt.Fprintf(&head, "%s: %s\r\n", name, v)
		}
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(sent); err != nil {
		t.Fatal(err)
	}
	return conn
}

// answerOf reads the response to a request on conn, failing the test if none comes in time.
func answerOf(t *testing.T, conn net.Conn, within time.Duration) hooktest.Reply {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		t.Fatalf("no answer within %v: the gateway is waiting for the body", within)
	}
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return hooktest.Reply{Status: resp.StatusCode, Body: string(body), Header: resp.Header}
}

// What can never verify is answered on the headers alone: the gateway does not wait for a body
// that is never sent.
func TestRefusedOnHeadersAloneBeforeTheBody(t *testing.T) {
	up := hooktest.NewUpstream(t)
	startGateway(t, "headersonly", up)
	good := hooktest.NewEvent(t, "evt_headersonly", "obj_headersonly", 1)
	header := func(edit func(http.Header)) http.Header {
		h := good.Headers.Clone()
		edit(h)
		return h
	}
	cases := []struct {
		name          string
		header        http.Header
		contentLength int
		status        int
		reason        string
	}{
		{"no signature", header(func(h http.Header) { h.Del("Webhook-Signature") }), 1000, 401, "missing signature"},
		{"garbled signature", header(func(h http.Header) { h.Set("Webhook-Signature", "v1,@@@not-base64@@@") }), 1000, 401, "malformed signature"},
		{"no timestamp", header(func(h http.Header) { h.Del("Webhook-Timestamp") }), 1000, 401, "missing timestamp"},
		{"timestamp too old", hooktest.SignedEvent(t, "evt_old", good.Body, time.Now().Add(-time.Hour), hooktest.Secret).Headers, 1000, 401, "stale timestamp"},
		{"timestamp in the future", hooktest.SignedEvent(t, "evt_new", good.Body, time.Now().Add(time.Hour), hooktest.Secret).Headers, 1000, 401, "future"},
		{"Content-Length over max_body", good.Headers, 1 << 20, 413, "max_body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := openRequest(t, "localhost:9080", "/hooks/test", tc.header, tc.contentLength, nil)
			hooktest.ExpectReply(t, tc.name, answerOf(t, conn, 5*time.Second), tc.status, tc.reason)
		})
	}
}

// budgetConfig is gatewayConfig with the hookgate global option setting body_budget.
func budgetConfig(budget, name, upstreamAddr string, extra ...string) string {
	return strings.Replace(gatewayConfig(name, upstreamAddr, extra...), "{\n",
		"{\n\thookgate {\n\t\tbody_budget "+budget+"\n\t}\n", 1)
}

// Past the body budget, a new request is answered 503 with Retry-After before its body is read;
// the budget comes back as requests end, and a sync request holds its share until the next
// handler has answered.
func TestBodyBudgetFullAnswers503Unread(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	tester.InitServer(budgetConfig("8KiB", "budget", up.Listener.Addr().String()), "caddyfile") // max_body 4KiB
	hooktest.WaitFor(t, "earlier tests' bodies to be released", 5*time.Second, func() bool { return bufferedBodies.used.Load() == 0 })

	// Two slow senders of well-formed forgeries, 4 KiB declared, 100 bytes sent, hold the budget.
	forged := hooktest.SignedEvent(t, "evt_budget_forged", "another body", time.Now(), hooktest.Secret).Headers
	holders := make([]net.Conn, 2)
	for i := range holders {
		holders[i] = openRequest(t, "localhost:9080", "/hooks/test", forged, 4096, make([]byte, 100))
	}
	hooktest.WaitFor(t, "the slow senders to hold 8 KiB", 5*time.Second, func() bool { return bufferedBodies.used.Load() == 8192 })

	genuine := hooktest.NewEvent(t, "evt_budget_1", "obj_budget_1", 1)
	unsent := openRequest(t, "localhost:9080", "/hooks/test", genuine.Headers, len(genuine.Body), nil)
	got := answerOf(t, unsent, 5*time.Second)
	hooktest.ExpectReply(t, "a genuine event, its body not sent, with the budget full", got, http.StatusServiceUnavailable, "body_budget (8.0 KiB)")
	if got.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}

	holders[0].Close()
	hooktest.WaitFor(t, "a slow sender's share to come back", 5*time.Second, func() bool { return bufferedBodies.used.Load() == 4096 })
	up.Mu.Lock()
	up.Block = make(chan struct{})
	up.Mu.Unlock()
	first := make(chan hooktest.Reply, 1)
	go func() { first <- send(t, tester.Client, genuine) }()
	hooktest.WaitFor(t, "the genuine event at the upstream", 5*time.Second, func() bool { return up.Count("evt_budget_1") == 1 })
	if used, want := bufferedBodies.used.Load(), 4096+pooledSize(int64(len(genuine.Body))); used != want {
		t.Fatalf("%d bytes reserved while the upstream holds the event, want %d", used, want)
	}
	close(up.Block)
	hooktest.ExpectReply(t, "the genuine event once the budget has room", <-first, http.StatusOK, "upstream says hi")
	holders[1].Close()
	hooktest.WaitFor(t, "every share to come back", 5*time.Second, func() bool { return bufferedBodies.used.Load() == 0 })
}

// A body of unknown length (chunked) is read up to max_body and refused past it.
func TestChunkedBodyBoundedByMaxBody(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "chunked", up) // max_body 4KiB
	for _, tc := range []struct {
		pad    int
		status int
		reason string
	}{{3000, http.StatusOK, "upstream says hi"}, {5000, http.StatusRequestEntityTooLarge, "max_body (4.0 KiB)"}} {
		id := fmt.Sprintf("evt_chunked_%d", tc.pad)
		body := fmt.Sprintf(`{"data":{"object":{"id":%q,"updated":1}},"pad":%q}`, id, strings.Repeat("a", tc.pad))
		ev := hooktest.SignedEvent(t, id, body, time.Now(), hooktest.Secret)
		req, _ := http.NewRequest(http.MethodPost, gateURL, io.MultiReader(strings.NewReader(body))) // no length: chunked
		for k, v := range ev.Headers {
			req.Header[k] = v
		}
		awaitLoadSettled(t, tester.Client)
		resp, err := tester.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hooktest.ExpectReply(t, fmt.Sprintf("chunked body of %d bytes", len(body)), hooktest.Reply{Status: resp.StatusCode, Body: string(answer)}, tc.status, tc.reason)
	}
}

// The budget never lets more than its limit be reserved, however many requests race for it.
func TestBodyBudgetNeverOverbooks(t *testing.T) {
	var b bodyBudget
	const limit, share = 10_000, 1_000
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 16 {
		wg.Go(func() {
			for range 1000 {
				if b.reserve(share, limit) {
					mu.Lock()
					peak = max(peak, b.used.Load())
					mu.Unlock()
					b.release(share)
				}
			}
		})
	}
	wg.Wait()
	if peak > limit || b.used.Load() != 0 {
		t.Fatalf("peak %d of a %d budget, %d left reserved", peak, limit, b.used.Load())
	}
	if !b.reserve(limit, limit) || b.reserve(1, limit) {
		t.Fatal("a full budget must take exactly its limit")
	}
}

// The default budget is a quarter of the Go memory limit, at most 64 MiB.
func TestDefaultBodyBudgetFollowsTheMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for limit, want := range map[int64]int64{
		135 << 20:     135 << 18, // a 150 MiB container: Caddy sets 90% of it
		math.MaxInt64: 64 << 20,  // no limit
		20 << 30:      64 << 20,  // Caddy's 90% of a large host's RAM
	} {
		debug.SetMemoryLimit(limit)
		if got := defaultBodyBudget(); got != want {
			t.Errorf("memory limit %d: default budget %d, want %d", limit, got, want)
		}
	}
}

// The global option sets the budget, and a max_body the budget could never hold is refused when
// the config loads.
func TestBodyBudgetGlobalOption(t *testing.T) {
	if err := validateCaddyfile(t, budgetConfig("2KiB", "tinybudget", unusedUpstream)); err == nil ||
		!strings.Contains(err.Error(), "max_body 4.0 KiB is more than the server's body_budget 2.0 KiB") {
		t.Fatalf("max_body 4KiB under body_budget 2KiB: %v, want it refused", err)
	}
	if err := validateCaddyfile(t, budgetConfig("4KiB", "smallbudget", unusedUpstream)); err != nil {
		t.Fatalf("max_body 4KiB under body_budget 4KiB: %v", err)
	}
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(budgetConfig("lots", "badbudget", unusedUpstream)), nil)
	if err == nil || !strings.Contains(err.Error(), "body_budget") {
		t.Fatalf("body_budget lots: %v, want a parse error", err)
	}
}

// A route whose verification allocates beside the body (Twilio's form parameters; a public key's
// copy of the signed message) reserves that too, from before the body is read until it is
// verified: the budget bounds the memory forged bodies take, not just their bytes. A max_body
// whose body and working memory the budget could never hold is refused when the config loads.
func TestBodyBudgetReservesVerificationWorkingMemory(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	twilio := func(budget, name, upstreamAddr string) string {
		return strings.Replace(budgetConfig(budget, name, upstreamAddr), "preset  standard", "preset  twilio", 1)
	}
	tester.InitServer(twilio("1MiB", "budget_twilio", up.Listener.Addr().String()), "caddyfile") // max_body 4KiB
	hooktest.WaitFor(t, "earlier tests' bodies to be released", 5*time.Second, func() bool { return bufferedBodies.used.Load() == 0 })
	cfg, _ := verify.Preset("twilio")
	v, err := verify.New(cfg, []string{hooktest.Secret})
	if err != nil {
		t.Fatal(err)
	}
	work := v.WorkingMemory(4096)
	if work < 2*4096 {
		t.Fatalf("Twilio's working memory for 4 KiB: %d bytes, want at least twice the body", work)
	}

	forged := http.Header{"X-Twilio-Signature": {"AAAAAAAAAAAAAAAAAAAAAAAAAAA="}, "I-Twilio-Idempotency-Token": {"budget-twilio-1"}}
	holder := openRequest(t, "localhost:9080", "/hooks/test", forged, 4096, make([]byte, 100))
	hooktest.WaitFor(t, fmt.Sprintf("the slow sender to hold its 4 KiB body and the %d bytes verifying it takes", work), 5*time.Second,
		func() bool { return bufferedBodies.used.Load() == 4096+work })
	holder.Close()
	hooktest.WaitFor(t, "the slow sender's share to come back", 5*time.Second, func() bool { return bufferedBodies.used.Load() == 0 })

	if err := validateCaddyfile(t, twilio("16KiB", "budget_twilio_small", unusedUpstream)); err == nil ||
		!strings.Contains(err.Error(), "its twilio verification allocates besides is more than the server's body_budget 16 KiB") {
		t.Fatalf("twilio, max_body 4KiB under body_budget 16KiB: %v, want it refused", err)
	}
}
