package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookgate/hookgate/dedupe"
)

// The page at scale: 50 routes with 110 dead letters each (more than the page lists; 1,000 each
// measured the same, with 45 s spent seeding them), in a real Badger ledger, listed as
// the admin API lists them (fields=delivery, 100 a route) by a page in a real browser. The
// table stays bounded at 100 dead letters a route however many there are, and so does the
// page's memory; the test logs what a refresh costs.
func TestDeadLetterPageAtScale(t *testing.T) {
	const routes, perRoute = 50, 110
	ledger, err := dedupe.OpenBadger(t.TempDir())
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

	browser := newBrowser(t, 80*time.Second)
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
