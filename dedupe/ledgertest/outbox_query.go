package ledgertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// queryChecks are the promises of Get, List and Replay (dedupe/outbox.go).
var queryChecks = []check{
	{name: "get/an event never accepted is ErrNotFound", run: func(t *testing.T, s Store) {
		other := eventOf("theirs", clock())
		other.Namespace = "other-route"
		expect(t, "accept in another namespace", accept(t, s, dedupe.Claim{Namespace: other.Namespace}, other), dedupe.Claimed)
		expectNotFound(t, "never accepted", s, "nope")
		expectNotFound(t, "accepted in another namespace", s, "theirs")
	}},
	{name: "list/returns one state's events, oldest accepted first, up to limit", run: func(t *testing.T, s Store) {
		base := clock()
		for i, id := range []string{"c", "a", "e", "b", "d"} { // accepted in the order a, b, c, d, e
			enqueue(t, s, eventOf(id, base.Add(time.Duration(id[0]-'a')*time.Second-time.Duration(i)*time.Millisecond)))
		}
		for _, ev := range lease(t, s, base.Add(time.Minute), 10, time.Hour) {
			if ev.ID != "b" && ev.ID != "d" {
				ev.State, ev.Attempts, ev.LastStatus = dedupe.Dead, 8, 500
				update(t, s, ev, time.Hour)
			}
		}
		expectIDs(t, "dead, limit 2", list(t, s, dedupe.Dead, dedupe.Cursor{}, 2), "a,c")
		expectIDs(t, "dead", list(t, s, dedupe.Dead, dedupe.Cursor{}, 10), "a,c,e")
		expectIDs(t, "pending", list(t, s, dedupe.Pending, dedupe.Cursor{}, 10), "b,d")
		expectIDs(t, "delivered", list(t, s, dedupe.Delivered, dedupe.Cursor{}, 10), "")
		evs, err := s.List(context.Background(), "other-route", dedupe.Dead, dedupe.Cursor{}, 10)
		if len(evs) != 0 || err != nil {
			t.Errorf("another namespace listed [%s], %v", ids(evs), err)
		}
	}},
	{name: "list/pages with a cursor, also through events accepted at the same time", run: func(t *testing.T, s Store) {
		base := clock()
		const n = 7
		for i := range n { // pairs share an accept time, then sort by ID
			enqueue(t, s, eventOf(fmt.Sprintf("evt_%d", n-1-i), base.Add(time.Duration((n-1-i)/2)*time.Second)))
		}
		var got []string
		var after dedupe.Cursor
		for page := 0; page <= n; page++ {
			evs := list(t, s, dedupe.Pending, after, 3)
			for _, ev := range evs {
				got = append(got, ev.ID)
				after = ev.After()
			}
			if len(evs) < 3 {
				break
			}
		}
		if fmt.Sprint(got) != "[evt_0 evt_1 evt_2 evt_3 evt_4 evt_5 evt_6]" {
			t.Errorf("pages of 3 listed %v, want each event once, in accept order", got)
		}
	}},
	{name: "list/leaves out headers and bodies but keeps BodyBytes", run: func(t *testing.T, s Store) {
		enqueue(t, s, eventOf("dead", clock()))
		settleAs(t, s, time.Now(), dedupe.Dead, time.Hour)
		enqueue(t, s, eventOf("pending", clock()))
		for _, st := range []dedupe.State{dedupe.Dead, dedupe.Pending} {
			want := eventOf(string(st), clock())
			evs := list(t, s, st, dedupe.Cursor{}, 10)
			if len(evs) != 1 {
				t.Fatalf("listed %d %s events, want 1", len(evs), st)
			}
			if ev := evs[0]; ev.Body != nil || ev.Header != nil || ev.BodyBytes != len(want.Body) || ev.Method != want.Method || ev.URI != want.URI {
				t.Errorf("listed %+v; want its request line and body size, not its header or body", ev)
			}
		}
		if got := get(t, s, "dead"); len(got.Body) == 0 || got.Header == nil {
			t.Errorf("Get after List: body %q, header %v; want them", got.Body, got.Header)
		}
	}},
	{name: "replay/makes a dead letter Pending again, due at now, with its attempts reset", run: replay},
	{name: "replay/an event the outbox does not hold is ErrNotFound", run: func(t *testing.T, s Store) {
		expectErr(t, "Replay of an event never accepted", s.Replay(context.Background(), ns, "nope", time.Now()), dedupe.ErrNotFound)
	}},
	{name: "replay/an event that is not dead is ErrNotDead and is left as it was", run: func(t *testing.T, s Store) {
		at := clock()
		for _, st := range []dedupe.State{dedupe.Delivered, dedupe.Superseded} {
			enqueue(t, s, eventOf(string(st), at))
			settleAs(t, s, time.Now(), st, time.Hour)
		}
		enqueue(t, s, eventOf(string(dedupe.Pending), at))
		for _, st := range []dedupe.State{dedupe.Delivered, dedupe.Superseded, dedupe.Pending} {
			expectErr(t, "Replay of a "+string(st)+" event", s.Replay(context.Background(), ns, string(st), time.Now()), dedupe.ErrNotDead)
			expectState(t, "after the refused replay", s, string(st), st)
		}
	}},
}

func replay(t *testing.T, s Store) {
	ctx := context.Background()
	want := eventOf("e", clock())
	enqueue(t, s, want)
	dead := leaseOne(t, s, time.Now(), time.Minute)
	dead.State, dead.Attempts, dead.LastStatus, dead.LastError = dedupe.Dead, 8, 500, "upstream: 500"
	update(t, s, dead, time.Hour)

	now := clock().Add(time.Hour)
	if err := s.Replay(ctx, ns, "e", now); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	expectIDs(t, "dead after the replay", list(t, s, dedupe.Dead, dedupe.Cursor{}, 10), "")
	expectIDs(t, "pending after the replay", list(t, s, dedupe.Pending, dedupe.Cursor{}, 10), "e")
	expectIDs(t, "just before now", lease(t, s, now.Add(-time.Millisecond), 10, time.Minute), "")
	got := leaseOne(t, s, now, time.Minute)
	if got.State != dedupe.Pending || got.Attempts != 0 || string(got.Body) != string(want.Body) {
		t.Errorf("replayed: %s, %d attempts, body %q; want pending, 0 attempts, the body accepted", got.State, got.Attempts, got.Body)
	}
	dead.State = dedupe.Delivered
	expectErr(t, "Update by the holder that dead-lettered it", s.Update(ctx, dead, time.Hour), dedupe.ErrLeaseLost)
	got.State, got.Attempts = dedupe.Delivered, 1
	update(t, s, got, time.Hour)
	expectState(t, "delivered after the replay", s, "e", dedupe.Delivered)
}
