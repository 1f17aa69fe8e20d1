//go:build e2e

package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/badgerstore"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// chromiumPath is Debian's chromium, which ./xcaddy.sh test installs when it is missing.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts headless chromium for the test, bounded by within; it is stopped at cleanup.
// within bounds a hang, not speed: it covers chromium's start, which has taken 40 s on a loaded
// machine, and every step after it.
func newBrowser(t *testing.T, within time.Duration) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("Debian's chromium is needed at %s (%v): install it with `apt-get update && apt-get install -y chromium` (./xcaddy.sh test does)", chromiumPath, err)
	}
	// Chromium leaves its singleton directory in TMPDIR: one of the test's own, removed after
	// the browser stops (cleanups run last first). Not t.TempDir(): the directory holds a unix
	// socket, whose path must stay short.
	tmp, err := os.MkdirTemp("", "chromium")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	ctx, cancel := context.WithTimeout(t.Context(), within)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.WindowSize(1280, 720),
		chromedp.Env("TMPDIR="+tmp))
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancel() })
	return browser
}

// artifactDir is where a test leaves files worth looking at: $HOOKGATE_ARTIFACTS, else a
// directory removed after the test.
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("HOOKGATE_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// adminPost POSTs to the admin API as a browser page at origin would.
func adminPost(t *testing.T, path, origin string) (int, string) {
	t.Helper()
	return adminWithHeaders(t, http.MethodPost, path, map[string]string{"Origin": origin, "Sec-Fetch-Mode": "cors"})
}

// listingStore counts the listings the admin API asks of the store: with their requests (List,
// which on Badger reads each event's body) and without (ListDeliveries).
type listingStore struct {
	queueLedger
	withBodies, deliveries atomic.Int64
}

func (l *listingStore) List(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	l.withBodies.Add(1)
	return l.queueLedger.List(ctx, ns, state, after, limit)
}

func (l *listingStore) ListDeliveries(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	l.deliveries.Add(1)
	return l.queueLedger.ListDeliveries(ctx, ns, state, after, limit)
}

// countListings wraps the route's queue in a listingStore until the test ends.
func countListings(t *testing.T, route string) *listingStore {
	var counting *listingStore
	swapQueue(t, route, func(healthy queueLedger) queueLedger {
		counting = &listingStore{queueLedger: healthy}
		return counting
	})
	return counting
}

// An operator opens the dead-letter page in a real browser through `caddy hookgate ui`, with the
// admin API's default origins (the page, opened on the admin API itself, is refused), sees the
// dead letters, replays one with its button once the upstream is back, and sees it delivered;
// "Replay all dead" replays nothing until its confirmation is clicked. Another site's page
// cannot replay anything.
func TestDeadLetterPageInBrowser(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusBadRequest)
	cfg := gatewayConfig("uipage", unusedUpstream, asyncRoute(up.Listener.Addr().String(), "max_attempts 1"))
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg, "caddyfile")
	browser := newBrowser(t, 90*time.Second)

	for _, id := range []string{"evt_ui_1", "evt_ui_2"} {
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, id, "obj_"+id, 1)), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "both events dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/uipage?state=dead")
		return strings.Count(body, `"id":`) == 2
	})

	// Typed into the browser, the admin API's own address is refused under Caddy's default
	// origins: the navigation carries neither Origin nor Referer.
	resp, err := chromedp.Run(browser, chromedp.NavigateResponse("http://localhost:2999/hookgate/ui"))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS("body")))
	if err != nil || resp.Status != http.StatusForbidden || !strings.Contains(direct, "not allowed to access from origin") {
		t.Fatalf("the page opened on the admin API itself: %d %q (%v), want Caddy's 403 for a missing origin", resp.Status, direct, err)
	}

	listings := countListings(t, "uipage")
	link := startUIProxy(t)
	row := func(id string) chromedp.CSS { return chromedp.CSS(`#dead tr[data-id="` + id + `"]`) }
	if err := chromedp.Do(browser,
		chromedp.Navigate(link),
		chromedp.WaitVisible(row("evt_ui_1")),
		chromedp.WaitVisible(row("evt_ui_2")),
	); err != nil {
		t.Fatalf("the page never showed both dead letters: %v", err)
	}
	location, err := chromedp.Run(browser, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(location, "token") || !strings.HasSuffix(location, "/hookgate/ui") {
		t.Fatalf("the page's address is %s, want /hookgate/ui without the link's token", location)
	}
	again, err := chromedp.Run(browser, chromedp.NavigateResponse(link))
	if err != nil || again.Status != http.StatusUnauthorized {
		t.Fatalf("the link opened a second time: %v (%v), want 401", again, err)
	}
	if err := chromedp.Do(browser,
		chromedp.Navigate(link[:strings.Index(link, "/hookgate/")]+"/hookgate/ui"),
		chromedp.WaitVisible(row("evt_ui_1")),
	); err != nil {
		t.Fatalf("the page, opened again with the cookie, never showed the dead letters: %v", err)
	}
	deadRow, err := chromedp.Run(browser, chromedp.Text(row("evt_ui_1")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(deadRow, "400") || !strings.Contains(deadRow, "uipage") {
		t.Fatalf("the dead letter's row %q shows neither its last status 400 nor its route", deadRow)
	}
	// Refreshing the page lists the dead letters' deliveries, never their bodies.
	if n, d := listings.withBodies.Load(), listings.deliveries.Load(); n != 0 || d == 0 {
		t.Fatalf("showing the page listed events with their bodies %d times and without %d times, want only without", n, d)
	}
	if _, body := admin(t, http.MethodGet, "/hookgate/events/uipage?state=dead&fields=delivery"); !strings.Contains(body, `"last_status":400`) || strings.Contains(body, `"method"`) {
		t.Fatalf("the deliveries listing: %s, want each dead letter's last status and not its request", body)
	}
	if status, body := admin(t, http.MethodGet, "/hookgate/events/uipage?state=dead&fields=body"); status != http.StatusBadRequest {
		t.Fatalf("fields=body: %d %s, want 400", status, body)
	}
	deadCount, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#routes tr[data-route="uipage"] td.dead-count`)))
	if err != nil || deadCount != "2" {
		t.Fatalf("the queue table counts %q dead letters (%v), want 2", deadCount, err)
	}
	if _, body := admin(t, http.MethodGet, "/hookgate/routes"); !strings.Contains(body, `{"name":"uipage","paused":false,`) || !strings.Contains(body, `"backlog":0,"max_pending":100000}`) {
		t.Fatalf("GET /hookgate/routes: %s, want uipage with an empty backlog", body)
	}
	page, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, "obj_evt_ui_1") {
		t.Fatalf("the page shows an event's body:\n%s", page)
	}
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shotPath := filepath.Join(artifactDir(t), "dead-letter-page.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the page with two dead letters: %s", shotPath)

	// Another site's page posting to the admin API is refused, and replays nothing.
	if status, body := adminPost(t, "/hookgate/replay/uipage/evt_ui_1", "http://attacker.example"); status != http.StatusForbidden {
		t.Fatalf("a replay from a foreign origin: %d %s, want 403", status, body)
	}
	if status, body := adminPost(t, "/hookgate/replay/uipage?all=1", "http://attacker.example"); status != http.StatusForbidden {
		t.Fatalf("replay all from a foreign origin: %d %s, want 403", status, body)
	}
	if _, body := admin(t, http.MethodGet, "/hookgate/events/uipage/evt_ui_1"); !strings.Contains(body, `"state":"dead"`) {
		t.Fatalf("after refused replays the event is %s, want still dead", body)
	}

	up.Status.Store(http.StatusOK)
	if err := chromedp.Do(browser,
		chromedp.Click(chromedp.CSS(`#dead tr[data-id="evt_ui_1"] button`)),
		chromedp.WaitNotPresent(row("evt_ui_1")),
	); err != nil {
		t.Fatalf("the replayed dead letter never left the page: %v", err)
	}
	hooktest.WaitFor(t, "the replayed event delivered", 10*time.Second, func() bool { return up.Count("evt_ui_1") == 2 })
	message, err := chromedp.Run(browser, chromedp.Text(chromedp.ID("message")))
	if err != nil || !strings.Contains(message, "replayed 1") {
		t.Fatalf("the page says %q (%v), want it to say the event was replayed", message, err)
	}
	if _, body := admin(t, http.MethodGet, "/hookgate/events/uipage/evt_ui_1"); !strings.Contains(body, `"state":"delivered"`) {
		t.Fatalf("after the replay the event is %s, want delivered", body)
	}
	if n := up.Count("evt_ui_2"); n != 1 {
		t.Fatalf("the other dead letter was sent %d times, want once (only evt_ui_1 was replayed)", n)
	}
	if err := chromedp.Do(browser, chromedp.WaitVisible(row("evt_ui_2"))); err != nil {
		t.Fatalf("the other dead letter left the page: %v", err)
	}

	// "Replay all dead" clicked once only asks for a confirmation; the confirmation replays.
	replayAll := func(action string) chromedp.CSS {
		return chromedp.CSS(`#routes tr[data-route="uipage"] button[data-action="` + action + `"]`)
	}
	if err := chromedp.Do(browser,
		chromedp.Click(chromedp.CSS(`#routes tr[data-route="uipage"] button`)), // the first: Replay all dead
		chromedp.WaitVisible(replayAll("confirm-replay-all")),
	); err != nil {
		t.Fatalf("Replay all dead, clicked once, asked for no confirmation: %v", err)
	}
	if shot, err = chromedp.Run(browser, chromedp.FullScreenshot(100)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), "dead-letter-page-confirm.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, body := admin(t, http.MethodGet, "/hookgate/events/uipage/evt_ui_2"); !strings.Contains(body, `"state":"dead"`) || up.Count("evt_ui_2") != 1 {
		t.Fatalf("after one click on Replay all dead the event is %s and was sent %d times, want still dead, sent once", body, up.Count("evt_ui_2"))
	}
	if err := chromedp.Do(browser,
		chromedp.Click(replayAll("confirm-replay-all")),
		chromedp.WaitNotPresent(row("evt_ui_2")),
	); err != nil {
		t.Fatalf("the confirmed replay of all dead letters never emptied the page: %v", err)
	}
	hooktest.WaitFor(t, "the confirmed replay delivered", 10*time.Second, func() bool { return up.Count("evt_ui_2") == 2 })
	if message, err = chromedp.Run(browser, chromedp.Text(chromedp.ID("message"))); err != nil || !strings.Contains(message, "replayed 1 (every dead letter of uipage)") {
		t.Fatalf("the page says %q (%v), want it to say one dead letter was replayed", message, err)
	}
}

// The page's "Replay all dead" goes on from where the previous one stopped: clicked again and
// again, it reaches the dead letters behind two at the head that fail again slowly and take the
// room (max_pending 4) on every replay from the oldest.
func TestDeadLetterPageReplayAllGoesOnWhereItStopped(t *testing.T) {
	up, behind, drained := slowHeadDeadLetters(t, "uinext")
	browser := newBrowser(t, 90*time.Second)
	replayAll := func(action string) chromedp.CSS {
		return chromedp.CSS(`#routes tr[data-route="uinext"] button[data-action="` + action + `"]`)
	}
	message := func() string {
		text, _ := chromedp.Run(browser, chromedp.Text(chromedp.ID("message")))
		return text
	}
	if err := chromedp.Do(browser, chromedp.Navigate(startUIProxy(t)), chromedp.WaitVisible(replayAll("replay-all"))); err != nil {
		t.Fatal(err)
	}
	allReplayed := func() bool {
		for _, id := range behind {
			if up.Count(id) < 2 {
				return false
			}
		}
		return true
	}
	for rounds := 1; !allReplayed(); rounds++ {
		if rounds > 10 {
			t.Fatalf("after %d clicks on Replay all dead, the dead letters behind the slow ones were sent %v times, want each twice; the page says %q",
				rounds-1, upstreamCounts(up, behind), message())
		}
		// The first click says what the second will do, so the message holds no earlier answer.
		if err := chromedp.Do(browser, chromedp.Click(replayAll("replay-all")), chromedp.Click(replayAll("confirm-replay-all"))); err != nil {
			t.Fatal(err)
		}
		hooktest.WaitFor(t, "the replay's answer on the page", 10*time.Second, func() bool { return strings.Contains(message(), "replayed") })
		drained()
	}
	for id, n := range upstreamCounts(up, behind) {
		if n != 2 {
			t.Errorf("%s sent %d times, want twice", id, n)
		}
	}
}

// A refresh that began before a replay and answers after it must not put the replayed dead
// letter back on the page: the auto-refresh's slow listing (a busy ledger, many routes) is
// overtaken by the refresh that follows the click, and only the newest is shown.
func TestDeadLetterPageShowsNoStaleListingAfterAReplay(t *testing.T) {
	t.Parallel()
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
	browser := newBrowser(t, 90*time.Second)
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

// The page at scale: 50 routes with 110 dead letters each (more than the page lists; 1,000 each
// measured the same, with 45 s spent seeding them), in a real Badger ledger, listed as
// the admin API lists them (fields=delivery, 100 a route) by a page in a real browser. The
// table stays bounded at 100 dead letters a route however many there are, and so does the
// page's memory; the test logs what a refresh costs.
func TestDeadLetterPageAtScale(t *testing.T) {
	t.Parallel()
	const routes, perRoute = 50, 110
	ledger, err := badgerstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan error, routes)
	for r := range routes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := fmt.Sprintf("route-%02d", r)
			for i := range perRoute {
				ev := &dedupe.Event{Namespace: ns, ID: fmt.Sprintf("evt_%s_%04d", ns, i), Method: "POST", URI: "/hooks/x",
					Body: []byte(`{"n":1}`), AcceptedAt: at.Add(time.Duration(i) * time.Millisecond)}
				if _, err := ledger.Accept(ctx, dedupe.Claim{Namespace: ns}, ev, time.Hour); err != nil {
					errs <- err
					return
				}
			}
			for dead := 0; dead < perRoute; {
				leased, err := ledger.Lease(ctx, ns, at.Add(time.Hour), perRoute, time.Hour)
				if err != nil || len(leased) == 0 {
					errs <- fmt.Errorf("leasing %s: %d leased, %v", ns, len(leased), err)
					return
				}
				for _, ev := range leased {
					ev.State, ev.Attempts, ev.LastStatus = dedupe.Dead, 10, 502
					ev.LastError = "upstream answered 502 Bad Gateway; gave up after 10 attempts"
					if err := ledger.Update(ctx, ev, time.Hour); err != nil {
						errs <- err
						return
					}
				}
				dead += len(leased)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var listed, bytesOut, listNanos, refreshes atomic.Int64
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/hookgate/ui":
			(&AdminAPI{}).serveUI(w, r)
		case r.URL.Path == "/hookgate/routes":
			refreshes.Add(1)
			summaries := make([]map[string]any, routes)
			for i := range summaries {
				summaries[i] = map[string]any{"name": fmt.Sprintf("route-%02d", i), "paused": false, "backlog": 0, "max_pending": 100000}
			}
			writeJSON(w, map[string]any{"routes": summaries})
		case strings.HasPrefix(r.URL.Path, "/hookgate/events/"):
			if r.URL.Query().Get("fields") != "delivery" || r.URL.Query().Get("limit") != "100" {
				http.Error(w, "the page asked for more than deliveries, 100 at a time: "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			start := time.Now()
			evs, err := ledger.ListDeliveries(r.Context(), strings.TrimPrefix(r.URL.Path, "/hookgate/events/"), dedupe.Dead, dedupe.Cursor{}, 100)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			views := make([]deliveryView, 0, len(evs))
			for _, ev := range evs {
				views = append(views, deliveryOf(ev))
			}
			cw := &countingWriter{ResponseWriter: w}
			writeJSON(cw, map[string]any{"route": "x", "state": "dead", "events": views})
			listNanos.Add(int64(time.Since(start)))
			listed.Add(int64(len(evs)))
			bytesOut.Add(cw.n)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(page.Close)

	browser := newBrowser(t, 120*time.Second)
	if err := chromedp.Do(browser, chromedp.Navigate(page.URL+"/hookgate/ui")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(browser, chromedp.Poll[bool](`document.querySelectorAll("#dead tr[data-id]").length === 5000`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		n, _ := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll("#dead tr[data-id]").length`))
		t.Fatalf("the page shows %d dead letters, want 100 for each of 50 routes: %v", n, err)
	}
	heap := func() float64 {
		v, err := chromedp.Run(browser, chromedp.Evaluate[float64](`(() => { return performance.memory.usedJSHeapSize / 1048576 })()`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := heap()
	var ms []float64
	for range 5 {
		v, err := chromedp.Run(browser, chromedp.Evaluate[float64](`(async () => { const t = performance.now(); await refresh(); return performance.now() - t })()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, v)
	}
	after := heap()
	counts, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("td.dead-count")].map((td) => td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll("#dead tbody tr").length`))
	if len(counts) != routes || counts[0] != "100+" || rows != routes*100 {
		t.Fatalf("the queue table counts %v and the dead letters' table has %d rows, want 100+ for each of %d routes and %d rows", counts, rows, routes, routes*100)
	}
	n := refreshes.Load()
	t.Logf("%d refreshes: %d listing requests, %.0f dead letters and %.0f KiB a refresh, %.1f ms of ledger listing and encoding a refresh; "+
		"in the browser a refresh (requests and render) took %.0f ms each; JS heap %.1f MiB before 5 refreshes, %.1f MiB after",
		n, n*routes, float64(listed.Load())/float64(n), float64(bytesOut.Load())/float64(n)/1024,
		float64(listNanos.Load())/float64(n)/1e6, ms, before, after)
	// Unforced garbage collection makes the heap's size vary by several MiB; a page that kept
	// every refresh's rows would hold tens of MiB more.
	if after > 64 {
		t.Errorf("the page's JS heap grew from %.1f MiB to %.1f MiB over 5 refreshes", before, after)
	}
}

// countingWriter counts the bytes of a response.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}
