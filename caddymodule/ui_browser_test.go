package caddymodule

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/caddymodule/hookgatecmd"
	"github.com/hookgate/hookgate/dedupe"
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

// lineOf is a writer that hands over the first thing written to it: the link the ui command
// prints.
type lineOf chan string

func (l lineOf) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// startUIProxy runs `caddy hookgate ui` against the test's admin API until the test ends, and
// returns the one-time link it printed.
func startUIProxy(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	printed, done := make(lineOf, 1), make(chan error, 1)
	go func() { done <- hookgatecmd.Run(ctx, printed, "ui", "--address", "localhost:2999") }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the ui proxy: %v", err)
		}
	})
	select {
	case line := <-printed:
		link := strings.TrimSpace(line[strings.Index(line, "http://"):])
		t.Logf("caddy hookgate ui printed: %s", strings.TrimSpace(line))
		return link
	case err := <-done:
		t.Fatalf("the ui proxy did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the ui proxy printed no link")
	}
	return ""
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
