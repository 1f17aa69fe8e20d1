package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// routeBacklog reads the route's backlog and bound as `caddy hookgate status` shows them.
func routeBacklog(t *testing.T, route string) (backlog, bound int) {
	t.Helper()
	var status struct {
		Backlog    *int `json:"backlog"`
		MaxPending *int `json:"max_pending"`
	}
	out := hookgateCLI(t, "status", route)
	if err := json.Unmarshal([]byte(out), &status); err != nil || status.Backlog == nil || status.MaxPending == nil {
		t.Fatalf("status without backlog and max_pending: %s", out)
	}
	return *status.Backlog, *status.MaxPending
}

// While an event is being sent, the route's status shows the bytes of event bodies its
// deliverer holds in memory (what the deliverer's 64 MiB bound counts); none once it is
// delivered.
func TestStatusShowsTheBodyBytesTheDelivererHolds(t *testing.T) {
	up := hooktest.NewUpstream(t)
	release := up.HoldAnswers(t)
	tester := startAsyncGateway(t, "heldbytes", up.Listener.Addr().String(), "timeout 1m")
	ev := hooktest.NewEvent(t, "evt_held_1", "obj_held", 1)
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the event's attempt in flight", 10*time.Second, func() bool { return up.Count(ev.ID) == 1 })

	heldBytes := func() int {
		var status struct {
			HeldBytes *int `json:"held_bytes"`
		}
		code, body := admin(t, http.MethodGet, "/hookgate/status/heldbytes")
		if err := json.Unmarshal([]byte(body), &status); code != http.StatusOK || err != nil || status.HeldBytes == nil {
			t.Fatalf("status without held_bytes: %d %s", code, body)
		}
		return *status.HeldBytes
	}
	if n := heldBytes(); n != len(ev.Body) {
		t.Errorf("while its event of %d bytes is being sent, the route's status shows held_bytes %d", len(ev.Body), n)
	}
	release()
	hooktest.WaitFor(t, "the body let go once delivered", 10*time.Second, func() bool { return heldBytes() == 0 })
}

// TestAsyncBacklogBoundedByMaxPending floods an async route whose upstream hangs: past
// max_pending the provider gets 503 with Retry-After, the status shows the backlog at the bound,
// and once the upstream answers again the refused events are accepted on retry and every
// accepted event is delivered.
func TestAsyncBacklogBoundedByMaxPending(t *testing.T) {
	up := hooktest.NewUpstream(t)
	hang := make(chan struct{})
	up.Mu.Lock()
	up.Block = hang
	up.Mu.Unlock()
	released := false
	release := func() {
		if !released {
			released = true
			up.Mu.Lock()
			up.Block = nil
			up.Mu.Unlock()
			close(hang)
		}
	}
	t.Cleanup(release)
	const bound, flood = 5, 24
	tester := startAsyncGateway(t, "backlog", up.Listener.Addr().String(),
		fmt.Sprintf("max_pending %d", bound), "workers 2", "timeout 30s")

	events := make([]*hooktest.Event, flood)
	replies := make([]hooktest.Reply, flood)
	var wg sync.WaitGroup
	for i := range flood {
		events[i] = hooktest.NewEvent(t, fmt.Sprintf("evt_backlog_%d", i), fmt.Sprintf("obj_backlog_%d", i), 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], _ = sendUntilAnswered(tester.Client, events[i])
		}()
	}
	wg.Wait()
	var accepted, refused []int
	for i, got := range replies {
		switch got.Status {
		case http.StatusAccepted:
			accepted = append(accepted, i)
		case http.StatusServiceUnavailable:
			if got.Header.Get("Retry-After") == "" || !strings.Contains(got.Body, "max_pending") {
				t.Fatalf("refusal past the bound: %d %v %q", got.Status, got.Header, got.Body)
			}
			refused = append(refused, i)
		default:
			t.Fatalf("event %d: %d %q", i, got.Status, got.Body)
		}
	}
	if len(accepted) != bound {
		t.Fatalf("%d of %d events accepted while the upstream hangs, want max_pending = %d", len(accepted), flood, bound)
	}
	t.Logf("flood of %d: %d accepted, %d refused with 503; e.g. %q", flood, len(accepted), len(refused), replies[refused[0]].Body)
	if backlog, max := routeBacklog(t, "backlog"); backlog != bound || max != bound {
		t.Fatalf("status: backlog %d, max_pending %d, want %d and %d", backlog, max, bound, bound)
	}
	hooktest.ExpectReply(t, "a duplicate while full", send(t, tester.Client, events[accepted[0]]), http.StatusOK, `"duplicate":true`)

	release()
	for _, i := range refused { // the provider retries after Retry-After
		var got hooktest.Reply
		hooktest.WaitFor(t, "the retry accepted", 20*time.Second, func() bool {
			got = send(t, tester.Client, events[i])
			return got.Status != http.StatusServiceUnavailable
		})
		hooktest.ExpectReply(t, "retry once the upstream caught up", got, http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "every accepted event delivered", 20*time.Second, func() bool {
		backlog, _ := routeBacklog(t, "backlog")
		return backlog == 0
	})
	for i, ev := range events {
		if up.Count(ev.ID) == 0 {
			t.Fatalf("event %d (%s) was accepted but never delivered", i, ev.ID)
		}
	}
}
