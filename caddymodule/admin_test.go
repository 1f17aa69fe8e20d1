package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// Replaying all dead letters walks them a page at a time and replays each exactly once, even
// when the upstream kills them again at once: the walk does not come round to them again.
func TestAdminReplayAllInPages(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startAsyncGateway(t, "replaypages", up.Listener.Addr().String())
	const n = replayPage + 100
	for i := range n {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rp_%d", i), fmt.Sprintf("obj_rp_%d", i), 1)
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "every event dead", 20*time.Second, func() bool { return up.Total() >= n })
	hooktest.WaitFor(t, "the dead letters listed", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, fmt.Sprintf("/hookgate/events/replaypages?state=dead&limit=%d", maxListLimit))
		return strings.Count(body, `"id":`) == n
	})

	status, body := admin(t, http.MethodPost, "/hookgate/replay/replaypages?all=1")
	if status != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"replayed":%d`, n)) || !strings.Contains(body, `"left":0`) {
		t.Fatalf("replay all: %d %s, want all %d replayed", status, body, n)
	}
	hooktest.WaitFor(t, "every event sent again", 20*time.Second, func() bool { return up.Total() >= 2*n })
	time.Sleep(200 * time.Millisecond)
	for i := range n {
		if c := up.Count(fmt.Sprintf("evt_rp_%d", i)); c != 2 {
			t.Fatalf("evt_rp_%d sent %d times, want 2 (once, then once replayed)", i, c)
		}
	}

	if status, body := admin(t, http.MethodGet, fmt.Sprintf("/hookgate/events/replaypages?state=dead&limit=%d", maxListLimit+1)); status != http.StatusBadRequest {
		t.Fatalf("a listing above the cap: %d (%d bytes), want 400", status, len(body))
	}
}

// Event IDs may contain "/" (they are the provider's); the admin API and the CLI address them
// escaped.
func TestAdminAddressesIDsWithSlashes(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startAsyncGateway(t, "slashes", up.Listener.Addr().String())
	const id = "evt/with/slashes"
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, id, "obj_slashes", 1)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the dead letter", 10*time.Second, func() bool {
		var view eventView
		return json.Unmarshal([]byte(hookgateCLI(t, "show", "slashes", id)), &view) == nil && view.State == "dead"
	})
	up.Status.Store(http.StatusOK)
	if out := hookgateCLI(t, "replay", "slashes", id); !strings.Contains(out, `"replayed": 1`) {
		t.Fatalf("replay: %s", out)
	}
	hooktest.WaitFor(t, "delivery after the replay", 10*time.Second, func() bool { return up.Count(id) == 2 })
}

// startGatewayWithEmptyOrigin runs an async route under the admin settings docs/security.md gives for
// opening the dead-letter page: the empty origin listed beside the admin address.
func startGatewayWithEmptyOrigin(t *testing.T, route string) {
	t.Helper()
	cfg := gatewayConfig(route, unusedUpstream, asyncRoute(unusedUpstream))
	cfg = strings.Replace(cfg, "admin localhost:2999", "admin localhost:2999 {\n\t\torigins \"\" localhost:2999 127.0.0.1:2999\n\t}", 1)
	caddytest.NewTester(t).InitServer(cfg, "caddyfile")
}

// crossSiteGet is what a browser sends for a page on another site that holds a hidden
// <iframe referrerpolicy="no-referrer" src=url> (Caddy refuses no-cors fetches and images, not
// frame navigations): neither Origin nor Referer, Sec-Fetch-Mode: navigate, Sec-Fetch-Site:
// cross-site. The page cannot read the answer, but the admin API does the work.
func crossSiteGet(t *testing.T, path string) (int, string) {
	t.Helper()
	return adminWithHeaders(t, http.MethodGet, path, map[string]string{
		"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"})
}

// With docs/security.md's `origins ""`, any web page the operator visits can make the admin API list
// up to 1000 events of a route (each read with its payload from the ledger), as often as it
// likes: the empty origin is meant for an address typed into the browser (Sec-Fetch-Site: none),
// and hookgate's endpoints could refuse what a browser marks cross-site or same-site.
func TestAdminRefusesCrossSiteBrowserRequests(t *testing.T) {
	const route = "r12xsite"
	startGatewayWithEmptyOrigin(t, route)
	for _, path := range []string{
		"/hookgate/routes",
		"/hookgate/events/" + route + "?state=delivered&limit=1000",
		"/hookgate/status/" + route,
	} {
		if status, body := crossSiteGet(t, path); status != http.StatusForbidden {
			t.Errorf("a cross-site frame GET %s (no Origin, no Referer) was answered %d %.80s; want 403", path, status, body)
		}
	}
}

// docs/operations.md's word to scripts: Node's fetch sends Sec-Fetch-Mode and no Origin, which
// Caddy's admin endpoint refuses; with the admin address as Origin, the same fetch is answered.
// Run with Node itself, as a script would.
func TestAdminAPIFromNodeFetchNeedsAnOrigin(t *testing.T) {
	const route = "nodefetch"
	startAsyncGateway(t, route, unusedUpstream)
	awaitLoadSettled(t, http.DefaultClient)
	fetch := func(headers string) string {
		t.Helper()
		script := `const r = await fetch("http://localhost:2999/hookgate/status/` + route + `", {headers: ` + headers + `});
console.log(r.status, await r.text());`
		out, err := exec.Command("node", "--input-type=module", "-e", script).CombinedOutput()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := fetch(`{}`); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "client is not allowed to access from origin ''") {
		t.Errorf("Node's fetch without an Origin: %s; want 403, the empty origin not allowed", got)
	}
	if got := fetch(`{Origin: "http://localhost:2999"}`); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"backlog"`) {
		t.Errorf("Node's fetch with the admin address as Origin: %s; want 200 and the route's status", got)
	}
}
