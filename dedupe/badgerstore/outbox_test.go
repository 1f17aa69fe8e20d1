package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// base is an arbitrary fixed time the tests lease at, so due times need no sleeping.
var base = time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)

func queued(id string, at time.Time) *dedupe.Event {
	return &dedupe.Event{
		Namespace: "stripe",
		ID:        id,
		Method:    http.MethodPost,
		URI:       "/hooks/stripe?src=test",
		Header:    http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1,v1=ab"}},
		Body:      []byte(`{"id":"` + id + `"}`),
		Scheme:    "stripe",
		// AcceptedAt is also when the event is first due.
		AcceptedAt: at,
	}
}

func accept(t testing.TB, o dedupe.Outbox, c dedupe.Claim, ev *dedupe.Event) dedupe.Outcome {
	t.Helper()
	out, err := o.Accept(context.Background(), c, ev, time.Hour)
	if err != nil {
		t.Fatalf("Accept(%+v, %q): %v", c, ev.ID, err)
	}
	return out
}

// enqueue accepts ev with dedupe off, as a route without an ID path does.
func enqueue(t testing.TB, o dedupe.Outbox, ev *dedupe.Event) {
	t.Helper()
	expect(t, "accept "+ev.ID, accept(t, o, dedupe.Claim{Namespace: ev.Namespace}, ev), dedupe.Claimed)
}

func lease(t testing.TB, o dedupe.Outbox, now time.Time, n int, d time.Duration) []*dedupe.Event {
	t.Helper()
	evs, err := o.Lease(context.Background(), "stripe", now, n, d)
	if err != nil {
		t.Fatalf("Lease(%v, %d): %v", now, n, err)
	}
	return evs
}

func update(t testing.TB, o dedupe.Outbox, ev *dedupe.Event, keep time.Duration) {
	t.Helper()
	if err := o.Update(context.Background(), ev, keep); err != nil {
		t.Fatalf("Update(%q, %s): %v", ev.ID, ev.State, err)
	}
}

func ids(evs []*dedupe.Event) string {
	s := ""
	for i, ev := range evs {
		if i > 0 {
			s += ","
		}
		s += ev.ID
	}
	return s
}

func expectIDs(t testing.TB, step string, evs []*dedupe.Event, want string) {
	t.Helper()
	if got := ids(evs); got != want {
		t.Errorf("%s: got [%s], want [%s]", step, got, want)
	}
}

func getState(t testing.TB, o dedupe.Outbox, id string) dedupe.State {
	t.Helper()
	ev, err := o.Get(context.Background(), "stripe", id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return ev.State
}

func expectNotFound(t testing.TB, step string, o dedupe.Outbox, id string) {
	t.Helper()
	if _, err := o.Get(context.Background(), "stripe", id); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("%s: Get(%q) = %v, want ErrNotFound", step, id, err)
	}
}

func TestAcceptDedupes(t *testing.T) {
	b := openTest(t)
	c := event("a")
	expect(t, "first accept", accept(t, b, c, queued("a", base)), dedupe.Claimed)
	expect(t, "accept again", accept(t, b, c, queued("a", base)), dedupe.Duplicate)
	expect(t, "sync claim after accept", claim(t, b, c), dedupe.Duplicate)

	held := event("held")
	expect(t, "sync claim", claim(t, b, held), dedupe.Claimed)
	expect(t, "accept while claimed", accept(t, b, held, queued("held", base)), dedupe.InFlight)
	expectNotFound(t, "in-flight accept", b, "held")

	// Queued in any state is a duplicate, also where no dedupe record is consulted.
	ev := lease(t, b, base, 1, time.Minute)[0]
	ev.State = dedupe.Dead
	update(t, b, ev, time.Hour)
	expect(t, "accept of a dead event, dedupe off", accept(t, b, dedupe.Claim{Namespace: "stripe"}, queued("a", base)), dedupe.Duplicate)
}

// The dedupe window and the queued event are two facts that Accept reads apart, neither implied
// by the other: an event still queued, or still kept once delivered, after its ID's dedupe window
// ended is a duplicate all the same, and so is an ID in its window whose event is gone. Only once
// both have lapsed is the ID taken again, by a new event that replaces the old one's entries.
func TestAcceptOfAnIDPastItsDedupeWindow(t *testing.T) {
	b := openTest(t)
	clock, start := withFakeClock(b)
	acceptAt := func(id string, at time.Time, dedupeTTL time.Duration) dedupe.Outcome {
		t.Helper()
		clock.set(at)
		ev := queued(id, at)
		ev.Body = []byte(at.Format(time.RFC3339Nano))
		out, err := b.Accept(context.Background(), event(id), ev, dedupeTTL)
		if err != nil {
			t.Fatalf("Accept(%q) at %v: %v", id, at, err)
		}
		return out
	}
	expect(t, "accept", acceptAt("late", start, time.Second), dedupe.Claimed)
	expect(t, "accept once the window ended, still queued", acceptAt("late", start.Add(2*time.Second), time.Second), dedupe.Duplicate)

	evs := lease(t, b, start.Add(2*time.Second), 1, time.Minute)
	expectIDs(t, "the first event", evs, "late")
	evs[0].State, evs[0].Attempts = dedupe.Delivered, 1
	update(t, b, evs[0], time.Second) // kept until start+3s
	expect(t, "accept once the window ended, delivered and kept", acceptAt("late", start.Add(2500*time.Millisecond), time.Second), dedupe.Duplicate)

	again := start.Add(3 * time.Second)
	expect(t, "accept once both lapsed", acceptAt("late", again, time.Second), dedupe.Claimed)
	got, err := b.Get(context.Background(), "stripe", "late")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != dedupe.Pending || got.Attempts != 0 || string(got.Body) != again.Format(time.RFC3339Nano) {
		t.Errorf("the ID taken again holds state %s, %d attempts, body %q; want the new event, pending", got.State, got.Attempts, got.Body)
	}
	if n := b.Pending("stripe"); n != 1 {
		t.Errorf("%d events pending, want the new one", n)
	}
	expectIDs(t, "lease after the ID was taken again", lease(t, b, again, 10, time.Minute), "late")

	// An ID in its window whose event is no longer kept is a duplicate too.
	expect(t, "accept", acceptAt("kept", again, time.Hour), dedupe.Claimed)
	evs = lease(t, b, again, 10, time.Minute)
	expectIDs(t, "the second event", evs, "kept")
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Second)
	expect(t, "accept once its event lapsed, in the window", acceptAt("kept", again.Add(2*time.Second), time.Hour), dedupe.Duplicate)
}

func TestAcceptWithoutID(t *testing.T) {
	b := openTest(t)
	off := dedupe.Claim{Namespace: "stripe"}
	expect(t, "first", accept(t, b, off, queued("r1", base)), dedupe.Claimed)
	expect(t, "second", accept(t, b, off, queued("r2", base)), dedupe.Claimed)
	expect(t, "same queue key", accept(t, b, off, queued("r2", base)), dedupe.Duplicate)
	expectIDs(t, "both queued", lease(t, b, base, 10, time.Minute), "r1,r2")
}

func TestAcceptStale(t *testing.T) {
	b := openTest(t)
	versioned := func(id string, v int64) (dedupe.Claim, *dedupe.Event) {
		c := event(id)
		c.Entity, c.Version = "cus_1", v
		ev := queued(id, base)
		ev.Entity, ev.Version = c.Entity, c.Version
		return c, ev
	}
	c, ev := versioned("v2", 2)
	expect(t, "v2", accept(t, b, c, ev), dedupe.Claimed)
	c, ev = versioned("v1", 1)
	expect(t, "v1 after v2", accept(t, b, c, ev), dedupe.Stale)
	expectNotFound(t, "stale event", b, "v1")
	expect(t, "stale wrote no dedupe record", claim(t, b, event("v1")), dedupe.Claimed)
	c, ev = versioned("v2b", 2)
	expect(t, "v2 again", accept(t, b, c, ev), dedupe.Stale)
	// Sync and async share the accepted version.
	c, _ = versioned("sync", 2)
	expect(t, "sync claim of v2", claim(t, b, c), dedupe.Stale)
	c, ev = versioned("v3", 3)
	expect(t, "v3", accept(t, b, c, ev), dedupe.Claimed)
	expectIDs(t, "queued", lease(t, b, base, 10, time.Minute), "v2,v3")
}

func TestAcceptSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := queued("durable", base)
	want.Entity, want.Version = "cus_9", 42
	want.Header.Add("X-Multi", "one")
	want.Header.Add("X-Multi", "two")
	// Larger than the value threshold, so it lives in the value log, and not UTF-8.
	want.Body = bytes.Repeat([]byte{0, 0xff, 'x', '\n'}, 1024)
	c := event("durable")
	c.Entity, c.Version = want.Entity, want.Version
	expect(t, "accept", accept(t, b, c, want), dedupe.Claimed)
	b = reopen(t, b, dir)
	evs := lease(t, b, base, 10, time.Minute)
	if len(evs) != 1 {
		t.Fatalf("leased %d events after reopen, want 1", len(evs))
	}
	got := evs[0]
	if got.Namespace != "stripe" || got.ID != want.ID || got.Method != want.Method || got.URI != want.URI ||
		got.Scheme != want.Scheme || got.Entity != want.Entity || got.Version != want.Version {
		t.Errorf("leased %+v, want the fields of %+v", got, want)
	}
	if !reflect.DeepEqual(got.Header, want.Header) {
		t.Errorf("header %v, want %v", got.Header, want.Header)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("body of %d bytes differs from the %d accepted", len(got.Body), len(want.Body))
	}
	if got.State != dedupe.Pending || got.Attempts != 0 || !got.AcceptedAt.Equal(base) {
		t.Errorf("state %s, attempts %d, accepted %v", got.State, got.Attempts, got.AcceptedAt)
	}
	expect(t, "dedupe after reopen", accept(t, b, c, queued("durable", base)), dedupe.Duplicate)
}

func TestOutboxInvalidInput(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	bad := queued("x", base)
	bad.Namespace = "a\x00b"
	if _, err := b.Accept(ctx, dedupe.Claim{Namespace: bad.Namespace}, bad, time.Hour); err == nil {
		t.Error("Accept took a namespace with NUL")
	}
	if _, err := b.Accept(ctx, dedupe.Claim{Namespace: "other"}, queued("x", base), time.Hour); err == nil {
		t.Error("Accept took an event of another namespace")
	}
	if _, err := b.Accept(ctx, event("x"), queued("", base), time.Hour); err == nil {
		t.Error("Accept took an empty event ID")
	}
	if _, err := b.Accept(ctx, event("x"), queued("x", base), 0); err == nil {
		t.Error("Accept took a zero dedupe ttl")
	}
	if _, err := b.Lease(ctx, "stripe", base, 1, 0); err == nil {
		t.Error("Lease took a zero lease")
	}
	if err := b.Update(ctx, &dedupe.Event{Namespace: "stripe", ID: "x", State: "lost"}, time.Hour); err == nil {
		t.Error("Update took an unknown state")
	}
	if err := b.Update(ctx, &dedupe.Event{Namespace: "stripe", ID: "x", State: dedupe.Dead}, 0); err == nil {
		t.Error("Update took a final state with zero keep")
	}
	if _, err := b.List(ctx, "stripe", "lost", dedupe.Cursor{}, 1); err == nil {
		t.Error("List took an unknown state")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Accept(cancelled, event("x"), queued("x", base), time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Accept with cancelled ctx: %v", err)
	}
	if _, err := b.Lease(cancelled, "stripe", base, 1, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Lease with cancelled ctx: %v", err)
	}
	if _, err := b.Get(cancelled, "stripe", "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with cancelled ctx: %v", err)
	}
	expectNotFound(t, "nothing was stored", b, "x")
}
