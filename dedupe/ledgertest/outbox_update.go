package ledgertest

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

var finalStates = []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded}

// updateChecks are the promises of Update and DeliveredVersion (dedupe/outbox.go).
var updateChecks = []check{
	{name: "update/Pending reschedules the event to its NextAttempt, with its attempt recorded", run: func(t *testing.T, s Store) {
		base := clock().Add(time.Hour)
		enqueue(t, s, eventOf("retry", base))
		ev := leaseOne(t, s, base, time.Minute)
		ev.Attempts, ev.LastStatus, ev.LastError = 1, 503, "upstream: 503 Service Unavailable"
		ev.NextAttempt = base.Add(10 * time.Minute)
		update(t, s, ev, 0)
		expectIDs(t, "before the retry is due", lease(t, s, ev.NextAttempt.Add(-time.Millisecond), 10, time.Minute), "")
		got := leaseOne(t, s, ev.NextAttempt, time.Minute)
		if got.State != dedupe.Pending || got.Attempts != 1 || got.LastStatus != 503 || got.LastError != ev.LastError {
			t.Errorf("leased %s, %d attempts, %d, %q; want the attempt recorded", got.State, got.Attempts, got.LastStatus, got.LastError)
		}
	}},
	{name: "update/Delivered, Dead and Superseded are final: never leased again nor changed by a later Update", run: func(t *testing.T, s Store) {
		base := clock().Add(time.Hour)
		for _, st := range finalStates {
			enqueue(t, s, eventOf(string(st), base))
		}
		evs := lease(t, s, base, 10, time.Minute)
		for _, ev := range evs {
			ev.State, ev.Attempts, ev.LastStatus = dedupe.State(ev.ID), 1, 200
			update(t, s, ev, time.Hour)
		}
		expectIDs(t, "a day later", lease(t, s, base.Add(24*time.Hour), 10, time.Minute), "")
		for _, ev := range evs {
			ev.State, ev.NextAttempt = dedupe.Pending, base
			if err := s.Update(context.Background(), ev, 0); err == nil {
				t.Errorf("a %s event was updated back to pending", ev.ID)
			}
			expectState(t, "after the refused update", s, ev.ID, dedupe.State(ev.ID))
		}
	}},
	{name: "update/Delivered and Superseded drop the header and body, Dead keeps them", run: func(t *testing.T, s Store) {
		at := clock()
		for _, st := range finalStates {
			enqueue(t, s, eventOf(string(st), at))
		}
		for _, ev := range lease(t, s, time.Now(), 10, time.Minute) {
			ev.State = dedupe.State(ev.ID)
			update(t, s, ev, time.Hour)
		}
		for _, st := range finalStates {
			got, want := get(t, s, string(st)), eventOf(string(st), at)
			if got.State != st || got.Method != want.Method || got.URI != want.URI || got.BodyBytes != len(want.Body) {
				t.Errorf("%s: stored %+v, want its request line and body size", st, got)
			}
			keeps := bytes.Equal(got.Body, want.Body) && reflect.DeepEqual(got.Header, want.Header)
			drops := got.Body == nil && got.Header == nil
			if st == dedupe.Dead && !keeps {
				t.Errorf("dead: body %q, header %v; want them kept for replay", got.Body, got.Header)
			}
			if st != dedupe.Dead && !drops {
				t.Errorf("%s: body %q, header %v; want them dropped", st, got.Body, got.Header)
			}
		}
	}},
	{name: "update/an event the outbox does not hold is ErrNotFound", run: func(t *testing.T, s Store) {
		ev := eventOf("nope", clock())
		ev.State = dedupe.Delivered
		expectErr(t, "Update of an event never accepted", s.Update(context.Background(), ev, time.Hour), dedupe.ErrNotFound)
		expectNotFound(t, "after the refused update", s, "nope")
	}},
	{name: "deliveredversion/is the newest version delivered: Delivered advances it, never backwards, and no other state does", run: deliveredVersion},
}

func deliveredVersion(t *testing.T, s Store) {
	ctx := context.Background()
	expectDelivered := func(step string, want int64, wantFound bool) {
		t.Helper()
		v, ok, err := s.DeliveredVersion(ctx, ns, "cus_1")
		if v != want || ok != wantFound || err != nil {
			t.Errorf("%s: DeliveredVersion = %d, %v, %v; want %d, %v", step, v, ok, err, want, wantFound)
		}
	}
	at := clock().Add(-time.Minute) // due at once, in this order
	for _, v := range []int64{3, 5, 7, 9} {
		c, ev := versionedEvent(fmt.Sprint("v", v), "cus_1", v, at.Add(time.Duration(v)*time.Millisecond))
		expect(t, "accept "+ev.ID, accept(t, s, c, ev), dedupe.Claimed)
	}
	expectDelivered("before any delivery", 0, false)
	evs := lease(t, s, time.Now(), 10, time.Minute)
	expectIDs(t, "lease", evs, "v3,v5,v7,v9")
	if len(evs) != 4 {
		t.FailNow()
	}
	settle := func(ev *dedupe.Event, st dedupe.State) { ev.State = st; update(t, s, ev, time.Hour) }
	settle(evs[1], dedupe.Delivered)
	expectDelivered("after delivering 5", 5, true)
	settle(evs[0], dedupe.Delivered)
	expectDelivered("after delivering 3 late", 5, true)
	settle(evs[2], dedupe.Dead)
	expectDelivered("after 7 died", 5, true)
	settle(evs[3], dedupe.Superseded)
	expectDelivered("after 9 was superseded", 5, true)
	if v, ok, err := s.DeliveredVersion(ctx, ns, "cus_2"); ok || err != nil {
		t.Errorf("another entity: DeliveredVersion = %d, %v, %v; want none", v, ok, err)
	}
}
