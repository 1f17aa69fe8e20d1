package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// upstreamCounts is how many times up received each of ids.
func upstreamCounts(up *hooktest.Upstream, ids []string) map[string]int {
	counts := map[string]int{}
	for _, id := range ids {
		counts[id] = up.Count(id)
	}
	return counts
}

// Every ID a provider can send is addressable one at a time, whatever a path would make of it:
// replaying ".", "..", "a/b", "%2F" or "?#", through the API and then the CLI, sends that event
// again and no other.
func TestReplayOfDotIDReplaysOnlyThatEvent(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound) // every attempt makes a dead letter again
	tester := startAsyncGateway(t, "oddids", up.Listener.Addr().String())
	odd := []string{".", "..", "a/b", "%2F", "?#"}
	ids := append(odd, "evt_bystander")
	for i, id := range ids {
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, id, fmt.Sprintf("obj_odd_%d", i), 1)), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "every event dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/oddids?state=dead&fields=delivery")
		return strings.Count(body, `"id":`) == len(ids)
	})
	deadAgain := func(id string, sent int) {
		t.Helper()
		hooktest.WaitFor(t, fmt.Sprintf("%q sent %d times and dead again", id, sent), 10*time.Second, func() bool {
			var view eventView
			return up.Count(id) == sent && json.Unmarshal([]byte(hookgateCLI(t, "show", "oddids", id)), &view) == nil &&
				view.ID == id && view.State == "dead"
		})
	}
	want := upstreamCounts(up, ids)
	for _, id := range odd {
		status, body := admin(t, http.MethodPost, "/hookgate/replay/oddids?id="+url.QueryEscape(id))
		if status != http.StatusOK || !strings.Contains(body, `"replayed":1`) {
			t.Fatalf("POST /hookgate/replay/oddids?id=%s: %d %s, want one replayed", url.QueryEscape(id), status, body)
		}
		want[id]++
		deadAgain(id, want[id])
		if out := hookgateCLI(t, "replay", "oddids", id); !strings.Contains(out, `"replayed": 1`) {
			t.Fatalf("caddy hookgate replay oddids %q: %s, want one replayed", id, out)
		}
		want[id]++
		deadAgain(id, want[id])
		if got := upstreamCounts(up, ids); !maps.Equal(got, want) {
			t.Fatalf("after replaying %q: sent %v, want %v (only %q sent again)", id, got, want, id)
		}
		var view eventView
		status, body = admin(t, http.MethodGet, "/hookgate/events/oddids?id="+url.QueryEscape(id))
		if status != http.StatusOK || json.Unmarshal([]byte(body), &view) != nil || view.ID != id {
			t.Fatalf("GET /hookgate/events/oddids?id=%s: %d %s, want the event %q", url.QueryEscape(id), status, body, id)
		}
	}
}

// An empty event ID is refused, by the API (400, with the reason) and by the CLI before it sends
// anything; it never means "every dead letter", which takes ?all=1 (--all). A path ending in "."
// is redirected by Go's mux to the route's path, which names no dead letter, and is refused there.
func TestReplayRefusesAnEmptyID(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startAsyncGateway(t, "emptyid", up.Listener.Addr().String())
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, "evt_empty_1", "obj_empty_1", 1)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the dead letter", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/emptyid/evt_empty_1")
		return strings.Contains(body, `"state":"dead"`)
	})
	up.Status.Store(http.StatusOK)
	for _, c := range []struct{ method, path, reason string }{
		{http.MethodPost, "/hookgate/replay/emptyid/", "the event ID is empty"},
		{http.MethodPost, "/hookgate/replay/emptyid?id=", "the event ID is empty"},
		{http.MethodPost, "/hookgate/replay/emptyid/.", "?all=1"},
		{http.MethodPost, "/hookgate/replay/emptyid", "?all=1"},
		{http.MethodPost, "/hookgate/replay/emptyid?all=yes", "all must be 1"},
		{http.MethodPost, "/hookgate/replay/emptyid?all=1&id=evt_empty_1", "not both"},
		{http.MethodGet, "/hookgate/events/emptyid/", "the event ID is empty"},
		{http.MethodGet, "/hookgate/events/emptyid?id=", "the event ID is empty"},
	} {
		if status, body := admin(t, c.method, c.path); status != http.StatusBadRequest || !strings.Contains(body, c.reason) {
			t.Errorf("%s %s: %d %s, want 400 saying %q", c.method, c.path, status, body, c.reason)
		}
	}
	for _, args := range [][]string{{"replay", "emptyid", ""}, {"replay", "emptyid"}, {"show", "emptyid", ""}, {"replay", "--all", "emptyid", "evt_empty_1"}} {
		if out, err := runHookgateCLI(args...); err == nil {
			t.Errorf("caddy hookgate %q: %s, want it refused", args, out)
		}
	}
	if n := up.Count("evt_empty_1"); n != 1 {
		t.Fatalf("the dead letter was sent %d times, want once: a request without an ID replayed it", n)
	}
}

// deadLettersBehindHeldUpstream starts route with the given max_pending line and n dead letters,
// their IDs formatted from idFormat and 0 to n-1, then has the upstream hold every attempt so
// that a replayed event stays in the backlog.
func deadLettersBehindHeldUpstream(t *testing.T, route, maxPending string, n int, idFormat string) *caddytest.Tester {
	t.Helper()
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startAsyncGateway(t, route, up.Listener.Addr().String(), maxPending)
	for i := range n {
		id := fmt.Sprintf(idFormat, i)
		ev := hooktest.NewEvent(t, id, "obj_"+id, 1)
		hooktest.WaitFor(t, id+" accepted", 10*time.Second, func() bool { return send(t, tester.Client, ev).Status == http.StatusAccepted })
	}
	hooktest.WaitFor(t, "every event dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/"+route+"?state=dead&fields=delivery")
		return strings.Count(body, `"id":`) == n
	})
	hold := make(chan struct{})
	up.Mu.Lock()
	up.Block = hold
	up.Mu.Unlock()
	t.Cleanup(func() { close(hold) })
	return tester
}

// With max_pending 3 and 10 dead letters, replaying all replays while the backlog is below half
// the bound (2), says how many are left (8), and leaves room: a new webhook right after is
// accepted. A single replay with the backlog at its bound is refused with 503 and Retry-After.
func TestReplayAllLeavesRoomForNewEvents(t *testing.T) {
	const n = 10
	tester := deadLettersBehindHeldUpstream(t, "replayroom", "max_pending 3", n, "evt_room_%d")

	var replayed struct{ Replayed, Left *int }
	status, body := admin(t, http.MethodPost, "/hookgate/replay/replayroom?all=1")
	if status != http.StatusOK || json.Unmarshal([]byte(body), &replayed) != nil || replayed.Replayed == nil || replayed.Left == nil ||
		*replayed.Replayed != 2 || *replayed.Left != n-2 {
		t.Fatalf("replay all with max_pending 3: %d %s, want 2 replayed and %d left", status, body, n-2)
	}
	hooktest.ExpectReply(t, "a new webhook right after the replay", send(t, tester.Client, hooktest.NewEvent(t, "evt_room_new", "obj_room_new", 1)), http.StatusAccepted, "")

	req, _ := http.NewRequest(http.MethodPost, "http://localhost:2999/hookgate/replay/replayroom?id=evt_room_9", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	reason, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(reason), "max_pending (3)") {
		t.Fatalf("replaying one with the backlog at max_pending: %d, Retry-After %q, %s; want 503 with Retry-After and the reason",
			resp.StatusCode, resp.Header.Get("Retry-After"), reason)
	}
	if out := hookgateCLI(t, "replay", "--all", "replayroom"); !strings.Contains(out, `"replayed": 0`) || !strings.Contains(out, fmt.Sprintf(`"left": %d`, n-2)) {
		t.Fatalf("caddy hookgate replay --all with the backlog full: %s, want none replayed and %d left", out, n-2)
	}
}

// Replays sent side by side (a script replaying IDs in parallel, the page and the CLI at once)
// take the backlog to max_pending and no further: each reads the backlog and replays in one step,
// so they do not each see room for one more. The events past the bound are refused with 503.
func TestConcurrentReplaysStopAtMaxPending(t *testing.T) {
	const n = 40
	deadLettersBehindHeldUpstream(t, "replayrace", "max_pending 5", n, "evt_race_%02d")

	var wg sync.WaitGroup
	var replayed atomic.Int32
	for i := range n {
		wg.Go(func() {
			status, _ := admin(t, http.MethodPost, fmt.Sprintf("/hookgate/replay/replayrace?id=evt_race_%02d", i))
			if status == http.StatusOK {
				replayed.Add(1)
			}
		})
	}
	wg.Wait()
	var st routeStatus
	if _, body := admin(t, http.MethodGet, "/hookgate/status/replayrace"); json.Unmarshal([]byte(body), &st) != nil || st.Backlog > 5 || replayed.Load() > 5 {
		t.Fatalf("%d replays side by side with max_pending 5: %d replayed, backlog %d; want at most 5", n, replayed.Load(), st.Backlog)
	}
}

// slowHeadDeadLetters starts route with max_pending 4 (room for 2 replayed) and ten dead letters:
// at the head, two whose every attempt fails again slowly (holding their place in the backlog),
// then eight that the upstream, back now, accepts. It returns the upstream, the eight's IDs, and
// a wait for the backlog to drain.
func slowHeadDeadLetters(t *testing.T, route string) (up *hooktest.Upstream, behind []string, drained func()) {
	var failing atomic.Bool
	failing.Store(true)
	up = hooktest.NewUnstartedUpstream(t)
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookgate-Event-Id")
		up.Mu.Lock()
		up.Seen[id]++
		up.Mu.Unlock()
		switch {
		case strings.HasPrefix(id, "evt_slow_"):
			time.Sleep(200 * time.Millisecond) // fails again, and slowly: it holds its place in the backlog
			w.WriteHeader(http.StatusNotFound)
		case failing.Load():
			w.WriteHeader(http.StatusNotFound)
		}
	})
	up.Start()
	tester := startAsyncGateway(t, route, up.Listener.Addr().String(), "max_pending 4")
	ids := []string{"evt_slow_0", "evt_slow_1"}
	for i := range 8 {
		ids = append(ids, fmt.Sprintf("evt_behind_%d", i))
	}
	for i, id := range ids {
		ev := hooktest.NewEvent(t, id, fmt.Sprintf("obj_%s_%d", route, i), 1)
		hooktest.WaitFor(t, id+" accepted", 10*time.Second, func() bool { return send(t, tester.Client, ev).Status == http.StatusAccepted })
		hooktest.WaitFor(t, id+" dead", 10*time.Second, func() bool {
			_, body := admin(t, http.MethodGet, "/hookgate/events/"+route+"?id="+id)
			return strings.Contains(body, `"state":"dead"`)
		})
	}
	failing.Store(false)
	return up, ids[2:], func() {
		hooktest.WaitFor(t, "the backlog drained", 10*time.Second, func() bool {
			var st routeStatus
			_, body := admin(t, http.MethodGet, "/hookgate/status/"+route)
			return json.Unmarshal([]byte(body), &st) == nil && st.Backlog == 0
		})
	}
}

// "Replay all" that stops at half of max_pending answers where it stopped (next), and goes on
// from there when given it as after: dead letters that fail again slowly at the head of the
// queue, as many as the room, would otherwise take the room on every replay from the oldest, and
// the dead letters behind them would never be replayed.
func TestReplayAllGoesOnAfterWhereItStopped(t *testing.T) {
	up, behind, drained := slowHeadDeadLetters(t, "replaynext")
	// The first replay through the API, the next ones through the CLI's --after.
	status, body := admin(t, http.MethodPost, "/hookgate/replay/replaynext?all=1")
	for rounds := 1; ; rounds++ {
		var answer struct {
			Replayed, Left int
			Next           string
		}
		if status != http.StatusOK || json.Unmarshal([]byte(body), &answer) != nil {
			t.Fatalf("round %d of replay all: %d %s", rounds, status, body)
		}
		drained()
		if answer.Left == 0 {
			break
		}
		if answer.Next == "" || rounds == 10 {
			t.Fatalf("round %d of replay all: %s; want next while dead letters are left, and the replays to reach them", rounds, body)
		}
		body = hookgateCLI(t, "replay", "--all", "replaynext", "--after", answer.Next)
	}
	for _, id := range behind {
		if n := up.Count(id); n != 2 {
			t.Errorf("%s sent %d times, want twice: once dead, once replayed", id, n)
		}
	}
	for _, args := range [][]string{{"replay", "--all", "replaynext", "--after", "not-a-cursor"}, {"replay", "replaynext", "evt_behind_0", "--after", "x"}} {
		if out, err := runHookgateCLI(args...); err == nil {
			t.Errorf("caddy hookgate %q: %s, want it refused", args, out)
		}
	}
}
