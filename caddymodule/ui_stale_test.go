package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A refresh that began before a replay and answers after it must not put the replayed dead
// letter back on the page: the auto-refresh's slow listing (a busy ledger, many routes) is
// overtaken by the refresh that follows the click, and only the newest is shown.
func TestDeadLetterPageShowsNoStaleListingAfterAReplay(t *testing.T) {
	var mu sync.Mutex
	dead := true
	var hold chan struct{} // while set, the next listing is read at once and answered when it closes
	held := make(chan struct{}, 1)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/hookgate/ui":
			(&AdminAPI{}).serveUI(w, r)
		case r.URL.Path == "/hookgate/routes":
			writeJSON(w, map[string]any{"routes": []map[string]any{{"name": "r", "paused": false, "backlog": 0, "max_pending": 100}}})
		case r.URL.Path == "/hookgate/events/r":
			mu.Lock()
			events := []deliveryView{}
			if dead {
				events = append(events, deliveryView{ID: "evt_stale", State: "dead", Attempts: 1, LastStatus: 502, LastError: "upstream answered 502"})
			}
			wait := hold
			hold = nil
			mu.Unlock()
			if wait != nil {
				held <- struct{}{}
				<-wait
			}
			writeJSON(w, map[string]any{"route": "r", "state": "dead", "events": events})
		case r.URL.Path == "/hookgate/replay/r" && r.URL.Query().Get("id") == "evt_stale" && r.Method == http.MethodPost:
			mu.Lock()
			dead = false
			mu.Unlock()
			writeJSON(w, map[string]any{"route": "r", "replayed": 1})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(page.Close)
	browser := newBrowser(t, 45*time.Second)
	row := chromedp.CSS(`#dead tr[data-id="evt_stale"]`)
	if err := chromedp.Do(browser, chromedp.Navigate(page.URL+"/hookgate/ui"), chromedp.WaitVisible(row)); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	mu.Lock()
	hold = release
	mu.Unlock()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	select {
	case <-held: // the auto-refresh read the dead letter, and waits to answer
	case <-time.After(10 * time.Second):
		t.Fatal("the page did not refresh within 10 s")
	}
	// The held listing is still unanswered: the refresh after the click must not wait for it
	// (Chrome makes a request wait up to 20 s for another of the same URL to fill its cache).
	if err := chromedp.Do(browser, chromedp.Click(chromedp.CSS(`#dead tr[data-id="evt_stale"] button`))); err != nil {
		t.Fatal(err)
	}
	within, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(within, chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("the replayed dead letter did not leave the page while an earlier refresh was unanswered: %v", err)
	}
	close(release)
	time.Sleep(time.Second) // the held answer arrives; the next auto-refresh is seconds away
	n, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll('#dead tr[data-id="evt_stale"]').length`))
	if err != nil {
		t.Fatal(err)
	}
	message, _ := chromedp.Run(browser, chromedp.Text(chromedp.ID("message")))
	if n != 0 {
		t.Fatalf("%s", fmt.Sprintf("after the replay (the page says %q), a refresh begun before it shows the dead letter again", strings.TrimSpace(message)))
	}
}
