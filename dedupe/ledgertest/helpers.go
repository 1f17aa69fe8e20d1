package ledgertest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// ns is the namespace (route) the checks use; each check has a fresh store.
const ns = "route"

// dedupeTTL is the dedupe window of the checks that do not wait for it to end.
const dedupeTTL = time.Hour

// settle is how long past an expiry the checks look again.
const settle = 250 * time.Millisecond

// clock is the wall clock at whole milliseconds, so that a backend that keeps times to the
// millisecond gives back exactly the times it was given.
func clock() time.Time { return time.Now().Truncate(time.Millisecond) }

// sec is n seconds after t.
func sec(t time.Time, n int) time.Time { return t.Add(time.Duration(n) * time.Second) }

// claimOf is a sync-mode claim of id.
func claimOf(id string) dedupe.Claim {
	return dedupe.Claim{Namespace: ns, ID: id, Lease: time.Minute}
}

// versioned is a claim of id carrying version v of entity.
func versioned(id, entity string, v int64) dedupe.Claim {
	c := claimOf(id)
	c.Entity, c.Version = entity, v
	return c
}

// eventOf is an event as the gateway queues it, accepted (and first due) at at.
func eventOf(id string, at time.Time) *dedupe.Event {
	return &dedupe.Event{
		Namespace:  ns,
		ID:         id,
		Method:     http.MethodPost,
		URI:        "/hooks/route?src=test",
		Header:     http.Header{"Content-Type": {"application/json"}, "X-Signature": {"t=1,v1=ab"}},
		Body:       []byte(`{"id":"` + id + `"}`),
		Scheme:     "hmac",
		AcceptedAt: at,
	}
}

// versionedEvent is the claim and event of id carrying version v of entity.
func versionedEvent(id, entity string, v int64, at time.Time) (dedupe.Claim, *dedupe.Event) {
	ev := eventOf(id, at)
	ev.Entity, ev.Version = entity, v
	return versioned(id, entity, v), ev
}

func claim(t *testing.T, s Store, c dedupe.Claim) dedupe.Outcome {
	t.Helper()
	out, err := s.Claim(context.Background(), c)
	if err != nil {
		t.Fatalf("Claim(%+v): %v", c, err)
	}
	return out
}

func done(t *testing.T, s Store, c dedupe.Claim, ttl time.Duration) {
	t.Helper()
	if err := s.Done(context.Background(), c, ttl); err != nil {
		t.Fatalf("Done(%+v): %v", c, err)
	}
}

func release(t *testing.T, s Store, c dedupe.Claim) {
	t.Helper()
	if err := s.Release(context.Background(), c); err != nil {
		t.Fatalf("Release(%+v): %v", c, err)
	}
}

func accept(t *testing.T, s Store, c dedupe.Claim, ev *dedupe.Event) dedupe.Outcome {
	t.Helper()
	out, err := s.Accept(context.Background(), c, ev, dedupeTTL)
	if err != nil {
		t.Fatalf("Accept(%+v, %q): %v", c, ev.ID, err)
	}
	return out
}

// enqueue accepts ev with dedupe off, as a route without an ID does.
func enqueue(t *testing.T, s Store, ev *dedupe.Event) {
	t.Helper()
	expect(t, "accept "+ev.ID, accept(t, s, dedupe.Claim{Namespace: ns}, ev), dedupe.Claimed)
}

func lease(t *testing.T, s Store, now time.Time, n int, d time.Duration) []*dedupe.Event {
	t.Helper()
	evs, err := s.Lease(context.Background(), ns, now, n, d)
	if err != nil {
		t.Fatalf("Lease(%v, %d, %v): %v", now, n, d, err)
	}
	return evs
}

// leaseOne leases the single event due at now and fails the test if there is not exactly one.
func leaseOne(t *testing.T, s Store, now time.Time, d time.Duration) *dedupe.Event {
	t.Helper()
	evs := lease(t, s, now, 10, d)
	if len(evs) != 1 {
		t.Fatalf("Lease(%v) handed out [%s], want one event", now, ids(evs))
	}
	return evs[0]
}

func update(t *testing.T, s Store, ev *dedupe.Event, keep time.Duration) {
	t.Helper()
	if err := s.Update(context.Background(), ev, keep); err != nil {
		t.Fatalf("Update(%q, %s): %v", ev.ID, ev.State, err)
	}
}

// settleAs leases the single due event and updates it to state (kept for keep).
func settleAs(t *testing.T, s Store, now time.Time, state dedupe.State, keep time.Duration) *dedupe.Event {
	t.Helper()
	ev := leaseOne(t, s, now, time.Minute)
	ev.State = state
	update(t, s, ev, keep)
	return ev
}

func get(t *testing.T, s Store, id string) *dedupe.Event {
	t.Helper()
	ev, err := s.Get(context.Background(), ns, id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return ev
}

func list(t *testing.T, s Store, state dedupe.State, after dedupe.Cursor, limit int) []*dedupe.Event {
	t.Helper()
	evs, err := s.List(context.Background(), ns, state, after, limit)
	if err != nil {
		t.Fatalf("List(%s, %+v, %d): %v", state, after, limit, err)
	}
	return evs
}

func expect(t *testing.T, step string, got, want dedupe.Outcome) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", step, got, want)
	}
}

func expectErr(t *testing.T, step string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", step, err, want)
	}
}

func expectNotFound(t *testing.T, step string, s Store, id string) {
	t.Helper()
	_, err := s.Get(context.Background(), ns, id)
	expectErr(t, step+": Get("+id+")", err, dedupe.ErrNotFound)
}

func expectState(t *testing.T, step string, s Store, id string, want dedupe.State) {
	t.Helper()
	if got := get(t, s, id).State; got != want {
		t.Errorf("%s: %s is %s, want %s", step, id, got, want)
	}
}

func ids(evs []*dedupe.Event) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = ev.ID
	}
	return strings.Join(s, ",")
}

func expectIDs(t *testing.T, step string, evs []*dedupe.Event, want string) {
	t.Helper()
	if got := ids(evs); got != want {
		t.Errorf("%s: got [%s], want [%s]", step, got, want)
	}
}

// race runs f(i) for i in [0, n) in goroutines released at once, and returns once all are done.
func race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// tally counts outcomes from concurrent goroutines.
type tally struct {
	mu     sync.Mutex
	counts map[dedupe.Outcome]int
}

func (c *tally) add(o dedupe.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[dedupe.Outcome]int{}
	}
	c.counts[o]++
}

// expect fails the test unless the counts are exactly want.
func (c *tally) expect(t *testing.T, step string, want map[dedupe.Outcome]int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range []dedupe.Outcome{dedupe.Claimed, dedupe.Duplicate, dedupe.InFlight, dedupe.Stale, dedupe.Full} {
		if c.counts[o] != want[o] {
			t.Errorf("%s: outcomes %v, want %v", step, c.counts, want)
			return
		}
	}
}

// sleepUntil sleeps until at.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// attempts bounds the tries of a timed check (inTime).
const attempts = 5

// inTime runs try(0), try(1), ... until one reports that its timed check ran within its window
// of the wall clock, and so asserted, at most attempts times. A try whose check ran too late to
// tell returns false having asserted nothing of it, and the next try uses fresh IDs (suffixed
// with n). When no try ran in time the test fails: a check that never ran proves nothing.
func inTime(t *testing.T, what string, try func(n int) bool) {
	t.Helper()
	for n := range attempts {
		if try(n) {
			return
		}
		t.Logf("%s: try %d ran its check past its window; trying again", what, n+1)
	}
	t.Fatalf("%s: none of %d tries ran its check within its window; the machine is too loaded to tell", what, attempts)
}

// alignedStart sleeps until half a second into a second of the wall clock and returns the time
// then, the start of a try. A TTL set within the next half second and cut to whole seconds (as
// Badger keeps its own TTLs, rounded down) would then end by 0.5 s into it, before a check at
// 0.7 of it (lateCheck).
func alignedStart() time.Time {
	now := time.Now()
	at := now.Truncate(time.Second).Add(500 * time.Millisecond)
	if at.Before(now) {
		at = at.Add(time.Second)
	}
	sleepUntil(at)
	return time.Now()
}

// lateCheck is when to check that a TTL of d, set by a call made between start and end, still
// holds: 0.7 of d after start, and just past end+d cut to the whole second, where the TTL would
// end if a backend cut it so. ok is false when that is not before start+d, the TTL's earliest end (the
// call took too long): the try can prove nothing.
func lateCheck(start, end time.Time, d time.Duration) (at time.Time, ok bool) {
	at = start.Add(d * 7 / 10)
	if cut := end.Add(d).Truncate(time.Second).Add(10 * time.Millisecond); cut.After(at) {
		at = cut
	}
	return at, at.Before(start.Add(d))
}
