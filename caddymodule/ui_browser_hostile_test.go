//go:build e2e

package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// hostileUpstream answers with a malformed status line that carries markup, which Go's
// transport quotes into the attempt's error (the dead letter's last_error), until healthy.
type hostileUpstream struct {
	*httptest.Server
	healthy atomic.Bool
	mu      sync.Mutex
	seen    map[string]int
}

func newHostileUpstream(t *testing.T, statusLine string) *hostileUpstream {
	u := &hostileUpstream{seen: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen[r.Header.Get("Hookgate-Event-Id")]++
		u.mu.Unlock()
		if u.healthy.Load() {
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		buf.WriteString(statusLine + "\r\n\r\n")
		buf.Flush()
		conn.Close()
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *hostileUpstream) count(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[id]
}

// Event IDs come from the sender and last errors partly from the upstream: the page shows both
// as text (no element of theirs in the DOM, no script of theirs run), and a dead letter whose ID
// is a URL (with // in it), "." or ".." is replayed by its button through caddy hookgate ui, alone.
func TestDeadLetterPageShowsHostileTextAsText(t *testing.T) {
	const markup = `<img/src=x/onerror=document.title='pwned'>`
	up := newHostileUpstream(t, "HTTP/1.1 "+markup+" x")
	cfg := gatewayConfig("uihostile", unusedUpstream, asyncRoute(up.Listener.Addr().String(), "max_attempts 1"))
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg, "caddyfile")
	browser := newBrowser(t, 90*time.Second)

	hostileID := `evt"><svg/onload=document.title='pwned'>`
	urlID := "https://sender.example//events/1"
	ids := []string{hostileID, urlID, ".", ".."}
	for _, id := range ids {
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, id, "obj_"+url.QueryEscape(id), 1)), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "both events dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/uihostile?state=dead&fields=delivery")
		return strings.Count(body, `"id":`) == len(ids)
	})
	_, listing := admin(t, http.MethodGet, "/hookgate/events/uihostile?state=dead&fields=delivery")
	if !strings.Contains(listing, "malformed HTTP status code") {
		t.Fatalf("the dead letters' listing: %s, want the upstream's malformed status line in last_error", listing)
	}

	link := startUIProxy(t)
	if err := chromedp.Do(browser,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`#dead td.err`)),
	); err != nil {
		t.Fatalf("the page never showed a dead letter: %v", err)
	}
	if _, err := chromedp.Run(browser, chromedp.Poll[bool](`document.querySelectorAll("#dead tr[data-id]").length === 4`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page never showed both dead letters: %v", err)
	}
	elements, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll("#dead img, #dead svg, #routes img, #routes svg").length`))
	if err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(browser, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if elements != 0 || title == "pwned" {
		t.Fatalf("the page made %d elements of the sender's or upstream's text, and its title is %q", elements, title)
	}
	deadText, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#dead`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{hostileID, urlID, markup} {
		if !strings.Contains(deadText, text) {
			t.Errorf("the dead letters' table does not show %q as text:\n%s", text, deadText)
		}
	}

	up.healthy.Store(true)
	for i, id := range []string{urlID, ".", ".."} {
		clicked, err := chromedp.Run(browser, chromedp.Evaluate[bool](`(() => { for (const b of document.querySelectorAll("#dead button")) {
		if (b.dataset.id === `+jsString(id)+`) { b.click(); return true } } return false })()`))
		if err != nil || !clicked {
			t.Fatalf("no Replay button for %s (%v)", id, err)
		}
		hooktest.WaitFor(t, "the replayed "+id+" delivered", 10*time.Second, func() bool { return up.count(id) == 2 })
		if _, err := chromedp.Run(browser, chromedp.Poll[bool](`document.getElementById("message").textContent.includes("replayed 1 (" + `+jsString(id)+` + ")")`,
			chromedp.WithPollingTimeout(5*time.Second))); err != nil {
			message, _ := chromedp.Run(browser, chromedp.Text(chromedp.ID("message")))
			t.Fatalf("the page says %q (%v), want it to say %s was replayed", message, err, id)
		}
		for _, other := range ids[i+2:] {
			if n := up.count(other); n != 1 {
				t.Fatalf("replaying %q sent %q %d times, want once", id, other, n)
			}
		}
	}
	if n := up.count(hostileID); n != 1 {
		t.Fatalf("the other dead letter was sent %d times, want once", n)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
