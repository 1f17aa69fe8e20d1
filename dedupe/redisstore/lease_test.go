package redisstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func TestLeaseEarliestDueFirstAndMovesDue(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for i, id := range []string{"c", "a", "b"} {
		ev := queued(id, base)
		ev.NextAttempt = base.Add(time.Duration(i) * time.Second)
		if _, err := s.Accept(ctx, claim(id), ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	ev := queued("later", base)
	ev.NextAttempt = base.Add(time.Hour)
	if _, err := s.Accept(ctx, claim("later"), ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	now := base.Add(10 * time.Second)
	got := lease(t, s, now, 2)
	if !slices.Equal(ids(got), []string{"c", "a"}) {
		t.Fatalf("Lease of 2: %v, want [c a] (earliest due first)", ids(got))
	}
	first := got[0]
	if !first.NextAttempt.Equal(now.Add(time.Minute)) || first.LeaseToken != 1 || string(first.Body) != `{"id":"c"}` ||
		first.Header.Get("X-Raw") != "\xff\xfe not utf-8" || first.Method != "POST" || first.URI != "/hook?x=1" ||
		first.Scheme != "stripe" || !first.AcceptedAt.Equal(base) || first.State != dedupe.Pending {
		t.Fatalf("leased event: %+v", first)
	}
	if got := lease(t, s, now, 10); !slices.Equal(ids(got), []string{"b"}) {
		t.Fatalf("Lease again: %v, want [b] (the others are leased)", ids(got))
	}
	if got := lease(t, s, now, 10); len(got) != 0 {
		t.Fatalf("Lease with nothing due: %v", ids(got))
	}
}

func TestLeaseTakeoverAfterLapseIsFenced(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	accept(t, a, claim("e1"), base)
	held := lease(t, a, base, 1)
	if len(held) != 1 {
		t.Fatal("nothing leased")
	}
	if got := lease(t, b, base.Add(30*time.Second), 1); len(got) != 0 {
		t.Fatalf("the other node leased %v within the lease", ids(got))
	}
	taken := lease(t, b, base.Add(2*time.Minute), 1)
	if len(taken) != 1 || taken[0].LeaseToken != held[0].LeaseToken+1 {
		t.Fatalf("takeover after the lapse: %v", taken)
	}
	held[0].State = dedupe.Delivered
	if err := a.Update(ctx, held[0], time.Hour); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Fatalf("Update by the lapsed holder: %v, want ErrLeaseLost", err)
	}
	if got, _ := a.Get(ctx, ns, "e1"); got.State != dedupe.Pending {
		t.Fatalf("after the refused update the event is %s", got.State)
	}
	taken[0].State, taken[0].Attempts = dedupe.Delivered, 1
	if err := b.Update(ctx, taken[0], time.Hour); err != nil {
		t.Fatalf("Update by the new holder: %v", err)
	}
}

func TestLapsedHolderNotLeasedAgainStillUpdates(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	accept(t, s, claim("e1"), base)
	held := lease(t, s, base, 1)
	held[0].State = dedupe.Delivered
	if err := s.Update(ctx, held[0], time.Hour); err != nil {
		t.Fatalf("Update after the lease lapsed, nobody took it: %v", err)
	}
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	missing := queued("nope", base)
	missing.State = dedupe.Delivered
	if err := s.Update(ctx, missing, time.Hour); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Update of an unknown event: %v", err)
	}
	accept(t, s, claim("e1"), base)
	ev := lease(t, s, base, 1)[0]
	ev.State = dedupe.Superseded
	if err := s.Update(ctx, ev, 0); err == nil {
		t.Fatal("final Update without keep: no error")
	}
	ev.State = "lost"
	if err := s.Update(ctx, ev, time.Hour); err == nil {
		t.Fatal("Update to an unknown state: no error")
	}
	ev.State = dedupe.Superseded
	if err := s.Update(ctx, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	ev.State = dedupe.Pending
	if err := s.Update(ctx, ev, 0); err == nil || errors.Is(err, dedupe.ErrLeaseLost) {
		t.Fatalf("Update of a final event: %v, want an error saying it is final", err)
	}
}

func TestUpdatePendingReschedules(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	accept(t, s, claim("e1"), base)
	ev := lease(t, s, base, 1)[0]
	ev.Attempts, ev.LastStatus, ev.LastError = 1, 503, "upstream answered 503"
	ev.NextAttempt = base.Add(10 * time.Second)
	if err := s.Update(ctx, ev, 0); err != nil {
		t.Fatal(err)
	}
	if got := lease(t, s, base.Add(5*time.Second), 1); len(got) != 0 {
		t.Fatal("leased before its next attempt")
	}
	got := lease(t, s, base.Add(10*time.Second), 1)
	if len(got) != 1 || got[0].Attempts != 1 || got[0].LastStatus != 503 || got[0].LastError != "upstream answered 503" || got[0].LeaseToken != 2 {
		t.Fatalf("leased at its next attempt: %+v", got)
	}
}

func TestDeliveredDropsBodyAndAdvancesDeliveredVersion(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	accept(t, s, versioned("v5", "cus_1", 5), base)
	if _, ok, err := s.DeliveredVersion(ctx, ns, "cus_1"); ok || err != nil {
		t.Fatalf("delivered version before any delivery: %v %v", ok, err)
	}
	ev := lease(t, s, base, 1)[0]
	ev.State, ev.Attempts, ev.LastStatus = dedupe.Delivered, 1, 200
	if err := s.Update(ctx, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.DeliveredVersion(ctx, ns, "cus_1"); v != 5 || !ok || err != nil {
		t.Fatalf("delivered version: %d %v %v, want 5", v, ok, err)
	}
	got, err := s.Get(ctx, ns, "v5")
	if err != nil || got.State != dedupe.Delivered || got.Header != nil || got.Body != nil || got.BodyBytes != len(`{"id":"v5"}`) ||
		!got.NextAttempt.IsZero() || got.LastStatus != 200 {
		t.Fatalf("Get of a delivered event: %+v %v", got, err)
	}
}

// The version TTL is timedWindow (ledger_test.go).
func TestDeliveredVersionExpiresWithTheAcceptedOne(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := versioned("v1", "cus_1", 1)
	c.VersionTTL = timedWindow
	accept(t, s, c, base)
	ev := lease(t, s, base, 1)[0]
	ev.State = dedupe.Delivered
	if err := s.Update(ctx, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.DeliveredVersion(ctx, ns, "cus_1"); !ok {
		t.Fatal("no delivered version")
	}
	time.Sleep(pastTimedWindow)
	if _, ok, _ := s.DeliveredVersion(ctx, ns, "cus_1"); ok {
		t.Fatal("the delivered version outlived the accepted one")
	}
}

func TestDeadKeepsBodyAndReplays(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	accept(t, s, claim("d1"), base)
	ev := lease(t, s, base, 1)[0]
	ev.State, ev.Attempts, ev.LastStatus, ev.LastError = dedupe.Dead, 5, 500, "gave up"
	if err := s.Update(ctx, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, ns, "d1")
	if err != nil || got.State != dedupe.Dead || string(got.Body) != `{"id":"d1"}` || got.Header.Get("Content-Type") == "" {
		t.Fatalf("dead letter: %+v %v", got, err)
	}
	if n, _ := s.Pending(ctx, ns); n != 0 {
		t.Fatalf("Pending with only a dead letter: %d", n)
	}
	now := base.Add(time.Hour)
	if err := s.Replay(ctx, ns, "d1", now); err != nil {
		t.Fatal(err)
	}
	if err := s.Replay(ctx, ns, "d1", now); !errors.Is(err, dedupe.ErrNotDead) {
		t.Fatalf("Replay of a pending event: %v, want ErrNotDead", err)
	}
	if err := s.Replay(ctx, ns, "nope", now); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Replay of an unknown event: %v, want ErrNotFound", err)
	}
	if got := lease(t, s, now.Add(-time.Second), 1); len(got) != 0 {
		t.Fatal("the replayed event was due before the replay")
	}
	got2 := lease(t, s, now, 1)
	if len(got2) != 1 || got2[0].Attempts != 0 || got2[0].LastError != "gave up" || string(got2[0].Body) != `{"id":"d1"}` {
		t.Fatalf("replayed event: %+v", got2)
	}
	if n, _ := s.Pending(ctx, ns); n != 1 {
		t.Fatalf("Pending after replay: %d", n)
	}
}

func TestFinalStatesExpireAfterKeep(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for _, st := range []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded} {
		id := string(st)
		accept(t, s, claim(id), base)
		ev := lease(t, s, base, 1)[0]
		ev.State = st
		if err := s.Update(ctx, ev, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(150 * time.Millisecond)
	for _, st := range []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded} {
		if _, err := s.Get(ctx, ns, string(st)); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("Get of a %s event after keep: %v", st, err)
		}
		if got, err := s.List(ctx, ns, st, dedupe.Cursor{}, 10); err != nil || len(got) != 0 {
			t.Fatalf("List %s after keep: %v %v", st, ids(got), err)
		}
	}
	if err := s.Replay(ctx, ns, "dead", base); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Replay of an expired dead letter: %v", err)
	}
}

// Listings of final events do not keep the members of expired ones: at 100 deliveries a second
// they would grow by millions a day, listed or not.
func TestExpiredFinalEventsLeaveNoListingEntries(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	deliver := func(id string, keep time.Duration) {
		accept(t, s, claim(id), base)
		evs := lease(t, s, base, 1)
		evs[0].State = dedupe.Delivered
		if err := s.Update(ctx, evs[0], keep); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		deliver(fmt.Sprint("old", i), 50*time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	for i := range 10 {
		deliver(fmt.Sprint("new", i), time.Hour)
	}
	tag, _ := s.tag(ns)
	for key, want := range map[string]int64{"s:delivered": 10, "x": 10} {
		if n, err := s.client.ZCard(ctx, tag+key).Result(); err != nil || n != want {
			t.Errorf("%s holds %d members after 200 expired and 10 live deliveries, want %d (%v)", key, n, want, err)
		}
	}
}

// Queue entries of events whose hash is gone (evicted under allkeys-lru, deleted by hand, lost
// in a failover) are dropped as Lease meets them, with the events' Pending listing members: a
// live event behind more of them than one Lease examines goes out within a few calls, Pending
// (and so max_pending) counts only it, and the store reports the count, once per call.
func TestLeaseDropsEntriesOfGoneEvents(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	var reports []int
	s.OnGoneEvents(func(namespace string, n int) {
		if namespace != ns {
			t.Errorf("gone events reported for namespace %q", namespace)
		}
		reports = append(reports, n)
	})
	tag, _ := s.tag(ns)
	const gone = 300 // more than one run of the script examines (leaseScan)
	for i := range gone {
		accept(t, s, claim(fmt.Sprintf("gone%03d", i)), base.Add(time.Duration(i)*time.Microsecond))
	}
	accept(t, s, claim("live"), base.Add(time.Second))
	for i := range gone {
		s.client.Del(ctx, fmt.Sprintf("%se:gone%03d", tag, i))
	}
	var got []*dedupe.Event
	calls := 0
	for ; calls < 3 && len(got) == 0; calls++ {
		got = lease(t, s, base.Add(2*time.Second), 1)
	}
	if len(got) != 1 || got[0].ID != "live" {
		t.Fatalf("Lease behind %d entries of gone events, %d calls: %v, want [live]", gone, calls, ids(got))
	}
	if n, err := s.Pending(ctx, ns); err != nil || n != 1 {
		t.Fatalf("Pending with one live event behind %d gone ones: %d %v, want 1", gone, n, err)
	}
	if n := s.client.ZCard(ctx, tag+"q").Val(); n != 1 {
		t.Fatalf("%d queue entries left, want the live event's", n)
	}
	total := 0
	for _, n := range reports {
		total += n
	}
	if total != gone || len(reports) > calls {
		t.Fatalf("gone events reported %v over %d Lease calls, want %d in all, at most once per call", reports, calls, gone)
	}
}

// A Lease call that fails part way through its run of the script (here on a key of another type
// written by hand under an event's name; Redis keeps a script's writes made before an error)
// loses none of the events it had already taken: their lease lapses and a later Lease hands
// them out, once the foreign key is gone.
func TestLeaseFailingMidRunLosesNoEventItTook(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	tag, _ := s.tag(ns)
	accept(t, s, claim("e1"), base)
	accept(t, s, claim("e2"), base.Add(time.Microsecond))
	s.client.Del(ctx, tag+"e:e2")
	s.client.Set(ctx, tag+"e:e2", "not a hash", 0)
	if evs, err := s.Lease(ctx, ns, base.Add(time.Second), 2, time.Minute); err == nil {
		t.Fatalf("Lease over a string under an event's name: %v, want an error", ids(evs))
	}
	s.client.Del(ctx, tag+"e:e2")
	var got []string
	for call := 0; call < 3 && len(got) == 0; call++ {
		got = ids(lease(t, s, base.Add(3*time.Minute), 2))
	}
	if len(got) != 1 || got[0] != "e1" {
		p, _ := s.Pending(ctx, ns)
		t.Fatalf("after the failed Lease's lease lapsed, Lease handed out %v (%d pending), want [e1]", got, p)
	}
}

// An event whose hash is gone (evicted with its dedupe record) may be sent again by its provider
// and accepted anew under the same ID: the gone one's Pending listing member is not the new
// event's, and is dropped with the other gone events' members rather than count in Pending (and
// max_pending) beside it.
func TestLeaseDropsPendingMembersOfGoneEventsAcceptedAgain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	tag, _ := s.tag(ns)
	accept(t, s, claim("again"), base)
	accept(t, s, claim("gone"), base.Add(time.Millisecond))
	s.client.Del(ctx, tag+"e:again", tag+"i:again", tag+"e:gone")
	accept(t, s, claim("again"), base.Add(time.Second))
	got := lease(t, s, base.Add(2*time.Second), 10)
	if len(got) != 1 || got[0].ID != "again" {
		t.Fatalf("leased %v, want [again]", ids(got))
	}
	if n, err := s.Pending(ctx, ns); err != nil || n != 1 {
		t.Fatalf("Pending with one live event, accepted again after its first was gone: %d %v, want 1", n, err)
	}
}
