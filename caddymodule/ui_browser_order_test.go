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

// The dead-letter page marks a dead letter that holds its key, counts the route's held keys and
// lists them with their dead letters and waiting events, and a Skip button lets the key's waiting
// events go on while the dead letter stays dead.
func TestDeadLetterPageShowsAndSkipsAHeldKey(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusBadRequest) // the head dies at its first attempt
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("uiorder", unusedUpstream,
		fastForward("default", up.Listener.Addr().String(), "order header X-Order-Key", "max_attempts 1")), "caddyfile")
	browser := newBrowser(t, 90*time.Second)
	send1 := func(id string) {
		ev := typedEvent(t, id, "invoice.paid", "in_"+id, 1)
		ev.Headers.Set("X-Order-Key", "cus_<b>42</b>")
		hooktest.ExpectReply(t, id, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	send1("evt_uihold_1")
	hooktest.WaitFor(t, "the head dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/uiorder?id=evt_uihold_1")
		return strings.Contains(body, `"state":"dead"`)
	})
	up.Status.Store(http.StatusOK)
	send1("evt_uihold_2")

	const head = `#dead tr[data-id="evt_uihold_1"]`
	const heldRow = `#held tr[data-id="evt_uihold_1"]`
	heldCount := chromedp.TextContent(chromedp.CSS(`#routes tr[data-route="uiorder"] td.held-count`))
	if err := chromedp.Do(browser,
		chromedp.Navigate(startUIProxy(t)),
		chromedp.WaitVisible(chromedp.CSS(head+` button[data-action="skip"]`)),
	); err != nil {
		t.Fatalf("the page never showed the dead letter holding its key: %v", err)
	}
	key, keyErr := chromedp.Run(browser, chromedp.TextContent(chromedp.CSS(head+` td.order-key`)))
	held, heldErr := chromedp.Run(browser, heldCount)
	listed, listedErr := chromedp.Run(browser, chromedp.TextContent(chromedp.CSS(heldRow)))
	if keyErr != nil || heldErr != nil || listedErr != nil {
		t.Fatal(keyErr, heldErr, listedErr)
	}
	if key != "holds cus_<b>42</b>" || held != "1" {
		t.Errorf("order key cell %q, held keys %q: want the key, as text, marked held, and 1", key, held)
	}
	if !strings.HasPrefix(listed, "uiordercus_<b>42</b>evt_uihold_1") || !strings.HasSuffix(listed, "1Skip") {
		t.Errorf("held keys row %q: want the key, its dead letter, one event waiting and Skip", listed)
	}
	if up.Count("evt_uihold_2") != 0 {
		t.Fatal("the event behind the held head was delivered before the skip")
	}

	if err := chromedp.Do(browser,
		chromedp.Click(chromedp.CSS(heldRow+` button[data-action="skip"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(heldRow)),
		chromedp.WaitNotPresent(chromedp.CSS(head+` button[data-action="skip"]`)),
		chromedp.WaitVisible(chromedp.CSS(head)),
	); err != nil {
		t.Fatalf("the skipped dead letter kept its Skip button, or left the page: %v", err)
	}
	hooktest.WaitFor(t, "the event behind it, once skipped", 10*time.Second, func() bool { return up.Count("evt_uihold_2") == 1 })
	if _, body := admin(t, http.MethodGet, "/hookgate/events/uiorder?id=evt_uihold_1"); !strings.Contains(body, `"state":"dead"`) || strings.Contains(body, `"holds"`) {
		t.Errorf("the skipped head: %s, want a dead letter that holds nothing", body)
	}
	if held, err := chromedp.Run(browser, heldCount); err != nil || held != "0" {
		t.Errorf("held keys after the skip: %q (%v), want 0", held, err)
	}
}
