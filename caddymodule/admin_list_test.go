package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// deadPage is one page of a dead-letter listing.
type deadPage struct {
	Events []eventView `json:"events"`
	Next   *string     `json:"next"`
}

// checkPagingThroughDeadLetters sends n events (sendOne) to route, whose upstream kills each
// one at once, then pages through its dead letters 3 at a time with the API and with the CLI:
// each one is seen once, in the order of the whole listing, and only the last page has no next.
func checkPagingThroughDeadLetters(t *testing.T, route string, n int, sendOne func(i int)) {
	t.Helper()
	for i := range n {
		sendOne(i)
	}
	var whole deadPage
	hooktest.WaitFor(t, "every event dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/"+route+"?state=dead&limit=1000")
		return json.Unmarshal([]byte(body), &whole) == nil && len(whole.Events) == n
	})
	if whole.Next != nil {
		t.Fatalf("the whole listing has next %q, want none", *whole.Next)
	}
	var want []string
	for _, ev := range whole.Events {
		want = append(want, ev.ID)
	}
	const limit = 3
	for _, via := range []string{"API", "CLI"} {
		var seen []string
		after := ""
		for pages := 1; ; pages++ {
			var out string
			if via == "API" {
				q := url.Values{"state": {"dead"}, "limit": {fmt.Sprint(limit)}}
				if after != "" {
					q.Set("after", after)
				}
				var status int
				if status, out = admin(t, http.MethodGet, "/hookgate/events/"+route+"?"+q.Encode()); status != http.StatusOK {
					t.Fatalf("%s page %d: %d %s", via, pages, status, out)
				}
			} else {
				args := []string{"events", route, "--state", "dead", "--limit", fmt.Sprint(limit)}
				if after != "" {
					args = append(args, "--after", after)
				}
				out = hookgateCLI(t, args...)
			}
			var page deadPage
			if err := json.Unmarshal([]byte(out), &page); err != nil {
				t.Fatalf("%s page %d: %v: %s", via, pages, err, out)
			}
			for _, ev := range page.Events {
				seen = append(seen, ev.ID)
			}
			if page.Next == nil {
				break
			}
			if len(page.Events) != limit || pages*limit >= n {
				t.Fatalf("%s page %d: %d events and next %q after %d seen, want next only while more are left", via, pages, len(page.Events), *page.Next, len(seen))
			}
			after = *page.Next
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("paged through with the %s, %d pages of %d: saw %q, want each once, in order: %q", via, (n+limit-1)/limit, limit, seen, want)
		}
	}
	if status, body := admin(t, http.MethodGet, "/hookgate/events/"+route+"?state=dead&after=not-a-cursor"); status != http.StatusBadRequest || !strings.Contains(body, "cursor") {
		t.Fatalf("a listing after a made-up cursor: %d %s, want 400", status, body)
	}
}

// More dead letters than a page, in a Badger ledger: each seen once, in order, page by page.
func TestListingsPageThroughEveryDeadLetterOnce(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startAsyncGateway(t, "paging", up.Listener.Addr().String())
	checkPagingThroughDeadLetters(t, "paging", 9, func(i int) {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_page_%d", i), fmt.Sprintf("obj_page_%d", i), 1)
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	})
}

// The same on Redis.
func TestRedisListingsPageThroughEveryDeadLetterOnce(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startRedisAsyncGateway(t, "redispaging", srv.Addr, nil, up.Listener.Addr().String())
	checkPagingThroughDeadLetters(t, "redispaging", 9, func(i int) {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rpage_%d", i), fmt.Sprintf("obj_rpage_%d", i), 1)
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	})
}
