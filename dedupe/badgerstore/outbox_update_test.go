package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func TestUpdate(t *testing.T) {
	b := openTest(t)
	enqueue(t, b, queued("retry", base))
	ev := lease(t, b, base, 1, time.Minute)[0]
	ev.Attempts, ev.LastStatus, ev.LastError = 1, 503, "upstream: 503 Service Unavailable"
	ev.NextAttempt = base.Add(10 * time.Minute)
	update(t, b, ev, time.Hour)
	expectIDs(t, "before the retry is due", lease(t, b, ev.NextAttempt.Add(-time.Nanosecond), 10, time.Minute), "")
	got := lease(t, b, ev.NextAttempt, 10, time.Minute)
	expectIDs(t, "when the retry is due", got, "retry")
	if len(got) == 1 && (got[0].Attempts != 1 || got[0].LastStatus != 503 || got[0].LastError != ev.LastError) {
		t.Errorf("leased %+v, want the attempt recorded", got[0])
	}

	unknown := queued("nope", base)
	unknown.State = dedupe.Pending
	if err := b.Update(context.Background(), unknown, time.Hour); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Update of an unknown event: %v, want ErrNotFound", err)
	}
	ev = got[0] // the holder of the latest lease
	ev.State = dedupe.Superseded
	update(t, b, ev, time.Hour)
	expectIDs(t, "superseded is not leased", lease(t, b, base.Add(time.Hour), 10, time.Minute), "")
	ev.State, ev.NextAttempt = dedupe.Pending, base
	if err := b.Update(context.Background(), ev, time.Hour); err == nil || errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Update of a superseded event back to pending: %v, want an error in words", err)
	}
	if s := getState(t, b, "retry"); s != dedupe.Superseded {
		t.Errorf("state after the refused update: %s", s)
	}
}

func TestDelivered(t *testing.T) {
	b := openTest(t)
	clock, start := withFakeClock(b)
	ctx := context.Background()
	for _, v := range []int64{3, 5} {
		id := fmt.Sprint("v", v)
		c, ev := event(id), queued(id, base)
		c.Entity, c.Version, ev.Entity, ev.Version = "cus_1", v, "cus_1", v
		expect(t, "accept "+id, accept(t, b, c, ev), dedupe.Claimed)
	}
	if _, ok, err := b.DeliveredVersion(ctx, "stripe", "cus_1"); ok || err != nil {
		t.Errorf("DeliveredVersion before any delivery: %v, %v", ok, err)
	}
	evs := lease(t, b, base, 10, time.Minute)
	expectIDs(t, "lease", evs, "v3,v5")
	if len(evs) != 2 {
		t.FailNow()
	}
	evs[1].State = dedupe.Delivered
	update(t, b, evs[1], time.Second)
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	if v, ok, err := b.DeliveredVersion(ctx, "stripe", "cus_1"); v != 5 || !ok || err != nil {
		t.Errorf("DeliveredVersion after delivering 5 then 3: %d, %v, %v; want 5", v, ok, err)
	}

	clock.set(start.Add(time.Second - time.Nanosecond))
	if s := getState(t, b, "v5"); s != dedupe.Delivered {
		t.Errorf("1 ns before a 1 s keep ends: state %s, want delivered", s)
	}
	clock.set(start.Add(time.Second))
	expectNotFound(t, "as the keep ends", b, "v5")
	delivered, err := b.List(ctx, "stripe", dedupe.Delivered, dedupe.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	expectIDs(t, "delivered after v5's keep", delivered, "v3")
	expect(t, "dedupe outlives the keep", accept(t, b, event("v5"), queued("v5", base)), dedupe.Duplicate)
}

func TestListAndReplay(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	for i, id := range []string{"c", "a", "e", "b", "d"} { // accept times a < b < c < d < e
		enqueue(t, b, queued(id, base.Add(time.Duration(id[0]-'a')*time.Second-time.Duration(i))))
	}
	evs := lease(t, b, base.Add(time.Minute), 10, time.Hour)
	expectIDs(t, "lease", evs, "a,b,c,d,e")
	for _, ev := range evs {
		if ev.ID != "b" && ev.ID != "d" {
			ev.State, ev.Attempts, ev.LastStatus, ev.LastError = dedupe.Dead, 8, 500, "upstream: 500"
			update(t, b, ev, time.Hour)
		}
	}
	list := func(state dedupe.State, limit int) []*dedupe.Event {
		t.Helper()
		evs, err := b.List(ctx, "stripe", state, dedupe.Cursor{}, limit)
		if err != nil {
			t.Fatalf("List(%s, %d): %v", state, limit, err)
		}
		return evs
	}
	expectIDs(t, "dead, limit 2", list(dedupe.Dead, 2), "a,c")
	expectIDs(t, "dead", list(dedupe.Dead, 10), "a,c,e")
	expectIDs(t, "pending", list(dedupe.Pending, 10), "b,d")
	expectIDs(t, "delivered", list(dedupe.Delivered, 10), "")

	now := base.Add(2 * time.Hour)
	if err := b.Replay(ctx, "stripe", "c", now); err != nil {
		t.Fatal(err)
	}
	expectIDs(t, "dead after replay", list(dedupe.Dead, 10), "a,e")
	expectIDs(t, "pending after replay", list(dedupe.Pending, 10), "b,c,d")
	got := lease(t, b, now, 10, time.Hour)
	// b and d are due again too: their hour-long lease ran out at base+1h1m.
	expectIDs(t, "lease after replay", got, "b,d,c")
	if len(got) == 3 && (got[2].Attempts != 0 || got[2].LastError != "upstream: 500") {
		t.Errorf("replayed event: attempts %d, last error %q", got[2].Attempts, got[2].LastError)
	}
	if err := b.Replay(ctx, "stripe", "b", now); !errors.Is(err, dedupe.ErrNotDead) {
		t.Errorf("Replay of a pending event: %v, want ErrNotDead", err)
	}
	if err := b.Replay(ctx, "stripe", "nope", now); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Replay of an unknown event: %v, want ErrNotFound", err)
	}
}

// A delivered or superseded event keeps its request line and body size but not its headers or
// body; a dead one keeps them all for Replay.
func TestOnlyDeadEventsKeepTheirBody(t *testing.T) {
	b := openTest(t)
	for _, id := range []string{"delivered", "superseded", "dead"} {
		enqueue(t, b, queued(id, base))
	}
	for _, ev := range lease(t, b, base, 10, time.Minute) {
		ev.State = dedupe.State(ev.ID)
		update(t, b, ev, time.Hour)
	}
	for _, id := range []string{"delivered", "superseded", "dead"} {
		ev, err := b.Get(context.Background(), "stripe", id)
		if err != nil {
			t.Fatal(err)
		}
		want := queued(id, base)
		if ev.State != dedupe.State(id) || ev.Method != want.Method || ev.URI != want.URI || ev.BodyBytes != len(want.Body) {
			t.Errorf("%s: got %+v, want its request line and body size", id, ev)
		}
		if keeps := ev.Body != nil && ev.Header.Get("Stripe-Signature") != ""; keeps != (id == "dead") {
			t.Errorf("%s: body and headers kept = %v", id, keeps)
		}
	}
}
