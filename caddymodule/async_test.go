package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/caddymodule/hookgatecmd"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// asyncRoute is the hookgate block lines that make the test route async, forwarding to addr with
// retries fast enough for a test.
func asyncRoute(addr string, extra ...string) string {
	return fmt.Sprintf(`forward http://%s {
			backoff 50ms
			jitter none
			timeout 2s
			%s
		}`, addr, strings.Join(extra, "\n\t\t\t"))
}

func startAsyncGateway(t *testing.T, name, forwardTo string, extra ...string) *caddytest.Tester {
	t.Helper()
	cfg := gatewayConfig(name, unusedUpstream, asyncRoute(forwardTo, extra...))
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg, "caddyfile")
	return tester
}

// unusedUpstream is the reverse_proxy target of async test sites: async mode never calls it.
const unusedUpstream = "127.0.0.1:9"

func admin(t *testing.T, method, path string) (int, string) {
	t.Helper()
	return adminWithHeaders(t, method, path, nil)
}

// adminWithHeaders asks the test admin API, with header's fields set, as a browser would.
func adminWithHeaders(t *testing.T, method, path string, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://localhost:2999"+path, nil)
	for name, value := range header {
		req.Header.Set(name, value)
	}
	awaitLoadSettled(t, http.DefaultClient)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestAsyncAcknowledgesThenDelivers(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startAsyncGateway(t, "async", up.Listener.Addr().String())
	ev := hooktest.NewEvent(t, "evt_async_1", "obj_async", 1)

	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, `{"received":true,"id":"evt_async_1"}`)
	hooktest.WaitFor(t, "delivery", 10*time.Second, func() bool { return up.Count("evt_async_1") == 1 })
	hooktest.ExpectReply(t, "provider retry", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)

	got := up.Headers[0]
	if got.Get("Hookgate-Attempt") != "1" || got.Get("Hookgate-Verified") != "standard" || got.Get("Webhook-Id") != "evt_async_1" {
		t.Fatalf("upstream headers: %v", got)
	}
	if up.Bodies[0] != ev.Body {
		t.Fatalf("upstream body %q, want %q", up.Bodies[0], ev.Body)
	}
	hooktest.WaitFor(t, "delivered state", 5*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/async/evt_async_1")
		return strings.Contains(body, `"state":"delivered"`)
	})
	hooktest.ExpectReply(t, "older version after delivery", send(t, tester.Client, hooktest.NewEvent(t, "evt_async_0", "obj_async", 0)), http.StatusOK, `"stale":true`)
}

// `forward 127.0.0.1:3000`, as an operator writes reverse_proxy's upstreams, delivers over http;
// an address that is no upstream is refused with its line when the Caddyfile is read.
func TestAsyncForwardTakesABareHostAndPort(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	cfg := gatewayConfig("bare_forward", unusedUpstream, "forward "+up.Listener.Addr().String())
	tester.InitServer(cfg, "caddyfile")
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, "evt_bare_1", "obj_bare", 1)), http.StatusAccepted, `"id":"evt_bare_1"`)
	hooktest.WaitFor(t, "delivery over http to the bare host:port", 10*time.Second, func() bool { return up.Count("evt_bare_1") == 1 })

	for address, wantErr := range map[string]string{
		"ftp://127.0.0.1:21": `target "ftp://127.0.0.1:21": scheme must be http or https`,
		"http://":            `target "http:": host is missing`,
		"127.0.0.1:3000?x=1": `"127.0.0.1:3000?x=1" is neither a URL (http://host:port) nor a host:port`,
		"http://a/?x=1":      `must be only scheme, host and an optional path`,
	} {
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(gatewayConfig("bad_forward", unusedUpstream, "forward "+address)), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "at Caddyfile:") {
			t.Errorf("forward %s: %v, want an error with the line, containing %q", address, err, wantErr)
		}
	}
}

// forward takes a URL, or a bare host:port as reverse_proxy does; an address that is neither
// (reverse_proxy's unix socket, a scheme missing its colon or a slash) is refused when the config
// loads, as it was before bare host:port was taken, rather than loaded as an http URL to a host
// named "unix", "https" or "http:", to which every event goes until it is a dead letter.
func TestForwardRefusesAnAddressThatIsNeitherAURLNorAHostPort(t *testing.T) {
	for _, address := range []string{"unix//run/app.sock", "https//app.example.com", "http:/app.example.com"} {
		if cfg, err := (&Forward{URL: address}).deliverConfig(); err == nil {
			t.Errorf("forward %s: loaded as %s (host %q), want it refused", address, cfg.Target, cfg.Target.Host)
		}
	}
	for _, address := range []string{"127.0.0.1:3000", "app:8080", "[::1]:3000", "http://app:8080/prefix", "https://app.example.com"} {
		if _, err := (&Forward{URL: address}).deliverConfig(); err != nil {
			t.Errorf("forward %s: %v, want it taken", address, err)
		}
	}
}

// forward's URL may carry the upstream's basic-auth password (deliver sends its user info as
// Authorization); deliver's own errors quote the URL redacted, and so must the route's, whether
// the Caddyfile is read or the config provisioned.
func TestForwardErrorsNeverQuoteTheURLsPassword(t *testing.T) {
	const password = "s3cr3t-value"
	for _, address := range []string{"http://hookgate:" + password + "@app:30x0", "ftp://hookgate:" + password + "@app:21"} {
		if _, err := (&Forward{URL: address}).deliverConfig(); err == nil || strings.Contains(err.Error(), password) {
			t.Errorf("forward %s: %v, want an error without the password", address, err)
		}
		caddyfile := "http://localhost:9080 {\n\thookgate {\n\t\tpreset stripe\n\t\tforward " + address + "\n\t}\n}\n"
		if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil); err == nil || strings.Contains(err.Error(), password) {
			t.Errorf("a Caddyfile with forward %s: %v, want an error without the password", address, err)
		}
	}
}

func TestAsyncUpstreamDownThenBack(t *testing.T) {
	port := hooktest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	tester := startAsyncGateway(t, "downback", addr, "max_attempts 100")

	const n = 20
	for i := range n {
		hooktest.ExpectReply(t, "accepted while the app is down", send(t, tester.Client, hooktest.NewEvent(t, fmt.Sprintf("evt_downback_%d", i), fmt.Sprintf("obj_%d", i), 1)), http.StatusAccepted, "")
	}
	time.Sleep(500 * time.Millisecond) // several failed attempts, long enough to pause the upstream

	up := hooktest.NewUnstartedUpstream(t)
	up.Listener.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	up.Listener = l
	up.Start()
	hooktest.WaitFor(t, "every event once the app is back", 20*time.Second, func() bool { return up.Total() >= n })
	time.Sleep(200 * time.Millisecond)
	for i := range n {
		if c := up.Count(fmt.Sprintf("evt_downback_%d", i)); c != 1 {
			t.Fatalf("evt_downback_%d delivered %d times", i, c)
		}
	}
}

func TestAsyncDeadLetterListedAndReplayed(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startAsyncGateway(t, "dead", up.Listener.Addr().String())
	for _, id := range []string{"evt_dead_1", "evt_dead_2"} {
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, id, "obj_"+id, 1)), http.StatusAccepted, "")
	}

	var listing struct {
		Events []eventView `json:"events"`
	}
	hooktest.WaitFor(t, "two dead letters", 10*time.Second, func() bool {
		out := hookgateCLI(t, "events", "dead", "--state", "dead")
		return json.Unmarshal([]byte(out), &listing) == nil && len(listing.Events) == 2
	})
	if ev := listing.Events[0]; ev.ID != "evt_dead_1" || ev.Attempts != 1 || ev.LastStatus != http.StatusNotFound || ev.LastError == "" {
		t.Fatalf("dead letter: %+v", ev)
	}
	if out := hookgateCLI(t, "show", "dead", "evt_dead_2"); !strings.Contains(out, `"state": "dead"`) || !strings.Contains(out, `"last_status": 404`) {
		t.Fatalf("show: %s", out)
	}

	up.Status.Store(http.StatusOK)
	if out := hookgateCLI(t, "replay", "dead", "evt_dead_2"); !strings.Contains(out, `"replayed": 1`) {
		t.Fatalf("replay one: %s", out)
	}
	hooktest.WaitFor(t, "delivery after replaying one", 10*time.Second, func() bool { return up.Count("evt_dead_2") == 2 })
	if up.Count("evt_dead_1") != 1 {
		t.Fatal("replaying one dead letter sent another")
	}
	if status, body := admin(t, http.MethodPost, "/hookgate/replay/dead?all=1"); status != http.StatusOK || !strings.Contains(body, `"replayed":1`) {
		t.Fatalf("replay all: %d %s", status, body)
	}
	hooktest.WaitFor(t, "delivery after replaying all", 10*time.Second, func() bool { return up.Count("evt_dead_1") == 2 })
	if status, body := admin(t, http.MethodPost, "/hookgate/replay/dead/evt_nope"); status != http.StatusNotFound {
		t.Fatalf("replay of an unknown event: %d %s", status, body)
	}
	if out := hookgateCLI(t, "status", "dead"); !strings.Contains(out, `"paused": false`) {
		t.Fatalf("status: %s", out)
	}
}

// hookgateCLI runs `caddy hookgate <args>` against the test server's admin endpoint.
func hookgateCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runHookgateCLI(args...)
	if err != nil {
		t.Fatalf("caddy hookgate %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// runHookgateCLI is hookgateCLI for a command that may fail.
func runHookgateCLI(args ...string) (string, error) {
	return runHookgateCLIAt("localhost:2999", args...)
}

// runHookgateCLIAt runs `caddy hookgate <args>` against the admin API at address.
func runHookgateCLIAt(address string, args ...string) (string, error) {
	var out bytes.Buffer
	// --address right after the subcommand, so that it is a flag even when args hold "--".
	err := hookgatecmd.Run(context.Background(), &out, append([]string{args[0], "--address", address}, args[1:]...)...)
	return out.String(), err
}

func TestAsyncReloadDuringDelivery(t *testing.T) {
	up := hooktest.NewUpstream(t)
	addr := up.Listener.Addr().String()
	tester := startAsyncGateway(t, "asyncreload", addr)
	const n = 300
	for i := range n {
		if i == n/3 || i == 2*n/3 {
			tester.InitServer(gatewayConfig("asyncreload", unusedUpstream,
				asyncRoute(addr, fmt.Sprintf("workers %d", 4+i%7))), "caddyfile")
		}
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_ar_%d", i), fmt.Sprintf("obj_ar_%d", i), 1)
		got, _ := sendUntilAnswered(tester.Client, ev)
		hooktest.ExpectReply(t, "accepted", got, http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "every event delivered", 20*time.Second, func() bool { return up.Total() >= n })
	time.Sleep(200 * time.Millisecond)
	for i := range n {
		if c := up.Count(fmt.Sprintf("evt_ar_%d", i)); c != 1 {
			t.Fatalf("evt_ar_%d delivered %d times across two reloads", i, c)
		}
	}
}
