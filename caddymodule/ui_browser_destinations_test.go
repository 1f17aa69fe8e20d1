//go:build e2e

package caddymodule

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// The dead-letter page shows a route of two destinations as two queues, each with its own dead
// letters, and a replay on one destination's row replays that destination's dead letter only.
func TestDeadLetterPageShowsEachDestination(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusBadRequest)
	addr := up.Listener.Addr().String()
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("uidest", unusedUpstream,
		fastForward("billing", addr, "max_attempts 1"), fastForward("analytics", addr, "max_attempts 1")), "caddyfile")
	browser := newBrowser(t, 90*time.Second)

	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, typedEvent(t, "evt_uidest", "invoice.paid", "in_uidest", 1)), http.StatusAccepted, "")
	for _, dest := range []string{"billing", "analytics"} {
		hooktest.WaitFor(t, "dead in "+dest, 10*time.Second, func() bool {
			_, body := admin(t, http.MethodGet, "/hookgate/events/uidest?state=dead&dest="+dest)
			return strings.Contains(body, `"id":"evt_uidest"`)
		})
	}
	row := func(dest string) chromedp.CSS {
		return chromedp.CSS(`#dead tr[data-id="evt_uidest"][data-destination="` + dest + `"]`)
	}
	if err := chromedp.Do(browser,
		chromedp.Navigate(startUIProxy(t)),
		chromedp.WaitVisible(row("billing")),
		chromedp.WaitVisible(row("analytics")),
		chromedp.WaitVisible(chromedp.CSS(`#routes tr[data-route="uidest"][data-destination="billing"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#routes tr[data-route="uidest"][data-destination="analytics"]`)),
	); err != nil {
		t.Fatalf("the page never showed each destination's queue and dead letter: %v", err)
	}

	up.Status.Store(http.StatusOK)
	if err := chromedp.Do(browser,
		chromedp.Click(chromedp.CSS(`#dead tr[data-id="evt_uidest"][data-destination="billing"] button`)),
		chromedp.WaitNotPresent(row("billing")),
	); err != nil {
		t.Fatalf("billing's replayed dead letter never left the page: %v", err)
	}
	hooktest.WaitFor(t, "billing's replay delivered", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/uidest?dest=billing&id=evt_uidest")
		return strings.Contains(body, `"state":"delivered"`)
	})
	if _, body := admin(t, http.MethodGet, "/hookgate/events/uidest?dest=analytics&id=evt_uidest"); !strings.Contains(body, `"state":"dead"`) {
		t.Fatalf("analytics' dead letter after billing's replay: %s, want still dead", body)
	}
	if err := chromedp.Do(browser, chromedp.WaitVisible(row("analytics"))); err != nil {
		t.Fatalf("analytics' dead letter left the page: %v", err)
	}
	// Replay all is per destination too, from the CLI as from the page.
	out, err := runHookgateCLIAt("localhost:2999", "replay", "--all", "uidest", "--dest", "analytics")
	if err != nil || !strings.Contains(out, `"replayed": 1`) {
		t.Fatalf("caddy hookgate replay --all uidest --dest analytics: %v\n%s", err, out)
	}
	hooktest.WaitFor(t, "analytics' replay delivered", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/uidest?dest=analytics&id=evt_uidest")
		return strings.Contains(body, `"state":"delivered"`)
	})
	if err := chromedp.Do(browser, chromedp.WaitNotPresent(row("analytics"))); err != nil {
		t.Fatalf("analytics' replayed dead letter never left the page: %v", err)
	}
}
