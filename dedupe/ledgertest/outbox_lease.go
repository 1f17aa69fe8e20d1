package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// leaseChecks are the promises of Lease and of Update's fencing (dedupe/outbox.go). They lease at
// times an hour ahead, where the events' due times are exactly their accept times.
var leaseChecks = []check{
	{name: "lease/hands out due events earliest first, at most n", run: func(t *testing.T, s Store) {
		base := queueFive(t, s)
		now := sec(base, 10)
		expectIDs(t, "n = 3", lease(t, s, now, 3, time.Minute), "e1,e2,e3")
		expectIDs(t, "the rest that is due", lease(t, s, now, 10, time.Minute), "e4,e5")
		expectIDs(t, "all leased", lease(t, s, now, 10, time.Minute), "")
	}},
	{name: "lease/hands out only events due at or before now", run: func(t *testing.T, s Store) {
		base := queueFive(t, s)
		expectIDs(t, "just before the first is due", lease(t, s, sec(base, 1).Add(-time.Millisecond), 10, 2*time.Hour), "")
		expectIDs(t, "when the first is due", lease(t, s, sec(base, 1), 10, 2*time.Hour), "e1")
		expectIDs(t, "when the third is due", lease(t, s, sec(base, 3), 10, 2*time.Hour), "e2,e3")
		expectIDs(t, "before the late one is due", lease(t, s, sec(base, 3599), 10, 2*time.Hour), "e4,e5")
		expectIDs(t, "when the late one is due", lease(t, s, sec(base, 3600), 10, 2*time.Hour), "e9")
	}},
	{name: "lease/only hands out events of its namespace", run: func(t *testing.T, s Store) {
		at := clock()
		other := eventOf("theirs", at)
		other.Namespace = "other-route"
		expect(t, "accept in another namespace", accept(t, s, dedupe.Claim{Namespace: other.Namespace}, other), dedupe.Claimed)
		enqueue(t, s, eventOf("ours", at))
		expectIDs(t, "lease", lease(t, s, time.Now(), 10, time.Minute), "ours")
	}},
	{name: "lease/moves a leased event's due time to now+lease, which it carries as NextAttempt", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Hour)
		enqueue(t, s, eventOf("e", now))
		const d = 90 * time.Second
		ev := leaseOne(t, s, now, d)
		if !ev.NextAttempt.Equal(now.Add(d)) || ev.State != dedupe.Pending {
			t.Errorf("leased: next attempt %v, state %s; want %v, pending", ev.NextAttempt, ev.State, now.Add(d))
		}
		if got := get(t, s, "e").NextAttempt; !got.Equal(now.Add(d)) {
			t.Errorf("stored next attempt %v, want the lease's end %v", got, now.Add(d))
		}
		expectIDs(t, "within the lease", lease(t, s, now.Add(d-time.Millisecond), 10, time.Minute), "")
		expectIDs(t, "when the lease ends (the holder died)", lease(t, s, now.Add(d), 10, time.Minute), "e")
	}},
	{name: "lease/an event whose lease lapsed is handed out again with a new LeaseToken", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Hour)
		enqueue(t, s, eventOf("e", now))
		first := leaseOne(t, s, now, time.Minute)
		second := leaseOne(t, s, now.Add(time.Minute), time.Minute)
		third := leaseOne(t, s, now.Add(2*time.Minute), time.Minute)
		if first.LeaseToken == 0 || second.LeaseToken == first.LeaseToken || third.LeaseToken == second.LeaseToken || third.LeaseToken == first.LeaseToken {
			t.Errorf("lease tokens %d, %d, %d; want each lease its own, none 0", first.LeaseToken, second.LeaseToken, third.LeaseToken)
		}
	}},
	{name: "lease/a lapsed holder's Update after the event was leased again is ErrLeaseLost and writes nothing", run: leaseLost},
	{name: "lease/a lapsed holder's Update is stored when nobody leased the event since", run: func(t *testing.T, s Store) {
		enqueue(t, s, eventOf("e", clock()))
		ev := leaseOne(t, s, time.Now(), 50*time.Millisecond)
		time.Sleep(100 * time.Millisecond)
		ev.State, ev.Attempts, ev.LastStatus = dedupe.Delivered, 1, 200
		update(t, s, ev, time.Hour)
		expectState(t, "after the late update", s, "e", dedupe.Delivered)
	}},
	{name: "lease/of concurrent Leases each event goes to one caller", run: func(t *testing.T, s Store) {
		at := clock()
		for i := range 200 {
			enqueue(t, s, eventOf(fmt.Sprintf("evt_%03d", i), at))
		}
		leaseEachOnce(t, 200, time.Now(), []Store{s, s, s, s, s, s, s, s})
	}},
}

// queueFive queues e1..e5, accepted out of order n seconds after the base time it returns (an
// hour ahead), and e9 an hour after that.
func queueFive(t *testing.T, s Store) time.Time {
	base := clock().Add(time.Hour)
	for _, n := range []int{3, 1, 5, 2, 4} {
		enqueue(t, s, eventOf(fmt.Sprint("e", n), sec(base, n)))
	}
	enqueue(t, s, eventOf("e9", sec(base, 3600)))
	return base
}

func leaseLost(t *testing.T, s Store) {
	base := clock().Add(time.Hour)
	for _, late := range []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded, dedupe.Pending} {
		id := string(late)
		enqueue(t, s, eventOf(id, base))
		first := leaseOne(t, s, base, time.Second)
		second := leaseOne(t, s, sec(base, 2), time.Minute)

		first.State, first.Attempts, first.LastStatus, first.LastError = late, 1, 200, "the lapsed holder's outcome"
		first.NextAttempt = sec(base, 60)
		err := s.Update(context.Background(), first, time.Hour)
		expectErr(t, "the lapsed holder's Update("+id+") while the newer holder works", err, dedupe.ErrLeaseLost)
		got := get(t, s, id)
		if got.State != dedupe.Pending || got.Attempts != 0 || got.LastError != "" || !got.NextAttempt.Equal(second.NextAttempt) {
			t.Errorf("%s: stored %s, %d attempts, %q, due %v; want it as the newer lease left it", id, got.State, got.Attempts, got.LastError, got.NextAttempt)
		}

		second.Attempts, second.LastStatus, second.LastError = 1, 503, "the newer holder's outcome"
		second.NextAttempt = sec(base, 3600)
		update(t, s, second, time.Hour)
		err = s.Update(context.Background(), first, time.Hour)
		expectErr(t, "the lapsed holder's Update("+id+") after the newer holder's", err, dedupe.ErrLeaseLost)
		got = get(t, s, id)
		if got.State != dedupe.Pending || got.LastError != "the newer holder's outcome" || !got.NextAttempt.Equal(sec(base, 3600)) {
			t.Errorf("%s: stored %s, %q, due %v; want the newer holder's outcome", id, got.State, got.LastError, got.NextAttempt)
		}
	}
	expectIDs(t, "before the newer holders' retries", lease(t, s, sec(base, 3599), 10, time.Minute), "")
}

// leaseEachOnce has a goroutine per store lease from the stores until none hands out more, and
// checks that each of the n events due was handed out exactly once.
func leaseEachOnce(t *testing.T, n int, now time.Time, stores []Store) {
	var mu sync.Mutex
	got := map[string]int{}
	race(len(stores), func(i int) {
		for {
			evs, err := stores[i].Lease(context.Background(), ns, now, 5, time.Hour)
			if err != nil {
				t.Error(err)
				return
			}
			if len(evs) == 0 {
				return
			}
			mu.Lock()
			for _, ev := range evs {
				got[ev.ID]++
			}
			mu.Unlock()
		}
	})
	if len(got) != n {
		t.Errorf("%d distinct events handed out, want %d", len(got), n)
	}
	for id, k := range got {
		if k != 1 {
			t.Errorf("%s handed out %d times within its lease", id, k)
		}
	}
}
