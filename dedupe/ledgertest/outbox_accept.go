package ledgertest

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// acceptChecks are the promises of Accept (dedupe/outbox.go).
var acceptChecks = []check{
	{name: "accept/a new event is Claimed and queued Pending, as it arrived, due at its accept time", run: acceptStores},
	{name: "accept/an ID queued in any state is Duplicate", run: acceptQueuedDuplicate},
	{name: "accept/an ID done in sync mode is Duplicate", run: func(t *testing.T, s Store) {
		done(t, s, claimOf("a"), dedupeTTL)
		expect(t, "accept of a done ID", accept(t, s, claimOf("a"), eventOf("a", clock())), dedupe.Duplicate)
		expectNotFound(t, "the duplicate", s, "a")
	}},
	{name: "accept/an accepted ID is Duplicate to a sync claim", run: func(t *testing.T, s Store) {
		expect(t, "accept", accept(t, s, claimOf("a"), eventOf("a", clock())), dedupe.Claimed)
		expect(t, "sync claim of the accepted ID", claim(t, s, claimOf("a")), dedupe.Duplicate)
	}},
	{name: "accept/an ID held by a sync claim is InFlight and nothing is stored", run: func(t *testing.T, s Store) {
		expect(t, "sync claim", claim(t, s, claimOf("held")), dedupe.Claimed)
		expect(t, "accept while claimed", accept(t, s, claimOf("held"), eventOf("held", clock())), dedupe.InFlight)
		expectNotFound(t, "the in-flight accept", s, "held")
		release(t, s, claimOf("held"))
		expect(t, "accept after the release", accept(t, s, claimOf("held"), eventOf("held", clock())), dedupe.Claimed)
	}},
	{name: "accept/an entity's older or equal version is Stale and nothing is stored", run: acceptStale},
	{name: "accept/a digest accepted or in flight is refused under a fresh ID", run: func(t *testing.T, s Store) {
		expect(t, "first", accept(t, s, signed("a", "body-A"), eventOf("a", clock())), dedupe.Claimed)
		expect(t, "the same bytes under a fresh ID", accept(t, s, signed("b", "body-A"), eventOf("b", clock())), dedupe.Duplicate)
		expectNotFound(t, "the duplicate", s, "b")
		expect(t, "sync claim of the same bytes", claim(t, s, signed("c", "body-A")), dedupe.Duplicate)
		expect(t, "sync claim", claim(t, s, signed("held", "body-H")), dedupe.Claimed)
		expect(t, "accept of its bytes while claimed", accept(t, s, signed("d", "body-H"), eventOf("d", clock())), dedupe.InFlight)
		expect(t, "a new event", accept(t, s, signed("e", "body-E"), eventOf("e", clock())), dedupe.Claimed)
	}},
	{name: "accept/with ID \"\" every event is queued under its own key and only the version is checked", run: acceptWithoutID},
	{name: "accept/at MaxPending undelivered events a new one is Full; duplicates and stale events are still answered", run: acceptFull},
	{name: "accept/of concurrent accepts past MaxPending exactly the room left is Claimed", run: func(t *testing.T, s Store) {
		const bound, before, racing = 8, 3, 30
		bounded := func(id string) dedupe.Claim { c := claimOf(id); c.MaxPending = bound; return c }
		for i := range before {
			id := fmt.Sprint("old", i)
			expect(t, "room", accept(t, s, bounded(id), eventOf(id, clock())), dedupe.Claimed)
		}
		var got tally
		race(racing, func(i int) {
			id := fmt.Sprint("new", i)
			out, err := s.Accept(context.Background(), bounded(id), eventOf(id, clock()), dedupeTTL)
			if err != nil {
				t.Error(err)
				return
			}
			got.add(out)
		})
		got.expect(t, "racing accepts", map[dedupe.Outcome]int{dedupe.Claimed: bound - before, dedupe.Full: racing - (bound - before)})
	}},
	{name: "accept/of 50 concurrent accepts of one ID exactly one is Claimed", run: func(t *testing.T, s Store) {
		var got tally
		race(50, func(int) {
			out, err := s.Accept(context.Background(), claimOf("hot"), eventOf("hot", clock()), dedupeTTL)
			if err != nil {
				t.Error(err)
				return
			}
			got.add(out)
		})
		got.expect(t, "50 concurrent accepts", map[dedupe.Outcome]int{dedupe.Claimed: 1, dedupe.Duplicate: 49})
		expectIDs(t, "queued", lease(t, s, time.Now(), 10, time.Minute), "hot")
	}},
	{name: "accept/an event over MaxPayload is ErrTooLarge, its bytes stay out of the error, and nothing is stored", run: acceptTooLarge},
}

func acceptStores(t *testing.T, s Store) {
	at := clock().Add(time.Minute)
	want := eventOf("a", at)
	want.Entity, want.Version = "cus_9", 42
	want.Header.Add("X-Multi", "one")
	want.Header.Add("X-Multi", "two")
	want.Body = bytes.Repeat([]byte{0, 0xff, 'x', '\n'}, 256<<10) // 1 MiB, not UTF-8
	c := versioned("a", want.Entity, want.Version)
	expect(t, "accept", accept(t, s, c, want), dedupe.Claimed)

	got := get(t, s, "a")
	if got.Namespace != ns || got.ID != "a" || got.Method != want.Method || got.URI != want.URI ||
		got.Scheme != want.Scheme || got.Entity != want.Entity || got.Version != want.Version {
		t.Errorf("stored %+v, want the request fields of %+v", got, want)
	}
	if !reflect.DeepEqual(got.Header, want.Header) {
		t.Errorf("header %v, want %v", got.Header, want.Header)
	}
	if !bytes.Equal(got.Body, want.Body) || got.BodyBytes != len(want.Body) {
		t.Errorf("body of %d bytes (BodyBytes %d), want the %d accepted", len(got.Body), got.BodyBytes, len(want.Body))
	}
	if got.State != dedupe.Pending || got.Attempts != 0 || got.LeaseToken != 0 || !got.AcceptedAt.Equal(at) || !got.NextAttempt.Equal(at) {
		t.Errorf("state %s, attempts %d, lease token %d, accepted %v, due %v; want pending, 0, 0, due at its accept time %v",
			got.State, got.Attempts, got.LeaseToken, got.AcceptedAt, got.NextAttempt, at)
	}
	expectIDs(t, "lease just before its accept time", lease(t, s, at.Add(-time.Millisecond), 10, time.Minute), "")
	leased := lease(t, s, at, 10, time.Minute)
	expectIDs(t, "lease at its accept time", leased, "a")
	if len(leased) == 1 && !bytes.Equal(leased[0].Body, want.Body) {
		t.Errorf("leased a body of %d bytes, want the %d accepted", len(leased[0].Body), len(want.Body))
	}
}

func acceptQueuedDuplicate(t *testing.T, s Store) {
	final := []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded}
	for _, st := range final {
		expect(t, "accept", accept(t, s, claimOf(string(st)), eventOf(string(st), clock())), dedupe.Claimed)
		settleAs(t, s, time.Now(), st, time.Hour)
	}
	expect(t, "accept", accept(t, s, claimOf("leased"), eventOf("leased", clock())), dedupe.Claimed)
	leaseOne(t, s, time.Now(), time.Minute)
	expect(t, "accept", accept(t, s, claimOf("queued"), eventOf("queued", clock().Add(time.Hour))), dedupe.Claimed)

	for _, id := range []string{"delivered", "dead", "superseded", "leased", "queued"} {
		expect(t, "accept again of "+id, accept(t, s, claimOf(id), eventOf(id, clock())), dedupe.Duplicate)
		// With dedupe off, no dedupe record is consulted: the queued event itself is.
		expect(t, "accept again of "+id+", dedupe off", accept(t, s, dedupe.Claim{Namespace: ns}, eventOf(id, clock())), dedupe.Duplicate)
	}
	expectState(t, "after the duplicates", s, "dead", dedupe.Dead)
}

func acceptStale(t *testing.T, s Store) {
	c, ev := versionedEvent("v2", "cus_1", 2, clock())
	expect(t, "version 2", accept(t, s, c, ev), dedupe.Claimed)
	c, ev = versionedEvent("v1", "cus_1", 1, clock())
	expect(t, "version 1 after 2", accept(t, s, c, ev), dedupe.Stale)
	expectNotFound(t, "the stale event", s, "v1")
	expect(t, "the stale event's ID was not marked done", claim(t, s, claimOf("v1")), dedupe.Claimed)
	c, ev = versionedEvent("v2b", "cus_1", 2, clock())
	expect(t, "version 2 again", accept(t, s, c, ev), dedupe.Stale)
	// Sync and async share the entity's accepted version.
	expect(t, "sync claim of version 2", claim(t, s, versioned("sync", "cus_1", 2)), dedupe.Stale)
	c, ev = versionedEvent("v3", "cus_1", 3, clock())
	expect(t, "version 3", accept(t, s, c, ev), dedupe.Claimed)
	expectIDs(t, "queued", lease(t, s, time.Now(), 10, time.Minute), "v2,v3")
}

func acceptWithoutID(t *testing.T, s Store) {
	off := dedupe.Claim{Namespace: ns}
	at := clock().Add(-time.Minute) // due at once, in this order
	expect(t, "first", accept(t, s, off, eventOf("r1", at)), dedupe.Claimed)
	expect(t, "second", accept(t, s, off, eventOf("r2", at.Add(time.Millisecond))), dedupe.Claimed)
	expect(t, "the same queue key", accept(t, s, off, eventOf("r2", at)), dedupe.Duplicate)
	v := dedupe.Claim{Namespace: ns, Entity: "cus_1", Version: 5}
	expect(t, "version 5", accept(t, s, v, eventOf("r3", at.Add(2*time.Millisecond))), dedupe.Claimed)
	expect(t, "version 5 again under a new key", accept(t, s, v, eventOf("r4", at)), dedupe.Stale)
	expectIDs(t, "queued", lease(t, s, time.Now(), 10, time.Minute), "r1,r2,r3")
}

func acceptFull(t *testing.T, s Store) {
	bounded := func(c dedupe.Claim) dedupe.Claim { c.MaxPending = 3; return c }
	at := clock().Add(-time.Minute) // due at once, in this order
	expect(t, "1 of 3", accept(t, s, bounded(claimOf("a")), eventOf("a", at)), dedupe.Claimed)
	expect(t, "2 of 3", accept(t, s, bounded(claimOf("b")), eventOf("b", at.Add(time.Millisecond))), dedupe.Claimed)
	c, ev := versionedEvent("c", "cus_1", 5, at.Add(2*time.Millisecond))
	expect(t, "3 of 3", accept(t, s, bounded(c), ev), dedupe.Claimed)
	expect(t, "a fourth", accept(t, s, bounded(claimOf("d")), eventOf("d", at)), dedupe.Full)
	expectNotFound(t, "the refused event", s, "d")
	expect(t, "a duplicate while full", accept(t, s, bounded(claimOf("a")), eventOf("a", at)), dedupe.Duplicate)
	c, ev = versionedEvent("e", "cus_1", 4, at)
	expect(t, "a stale event while full", accept(t, s, bounded(c), ev), dedupe.Stale)

	leased := lease(t, s, time.Now(), 1, time.Minute)
	expectIDs(t, "leased", leased, "a")
	expect(t, "while one is being delivered (still undelivered)", accept(t, s, bounded(claimOf("d")), eventOf("d", at)), dedupe.Full)
	leased[0].State, leased[0].NextAttempt = dedupe.Pending, time.Now().Add(time.Hour)
	update(t, s, leased[0], 0)
	expect(t, "while one waits for its retry", accept(t, s, bounded(claimOf("d")), eventOf("d", at)), dedupe.Full)
	leased = lease(t, s, time.Now(), 1, time.Minute)
	leased[0].State = dedupe.Delivered
	update(t, s, leased[0], time.Hour)
	expect(t, "once one is delivered (the refusal marked nothing done)", accept(t, s, bounded(claimOf("d")), eventOf("d", at)), dedupe.Claimed)
	expect(t, "full again", accept(t, s, bounded(claimOf("f")), eventOf("f", at)), dedupe.Full)
}

func acceptTooLarge(t *testing.T, s Store) {
	const secret = "v1=SECRET-SIGNATURE-0123456789abcdef"
	ev := eventOf("big", clock())
	ev.Header.Set("X-Signature", secret)
	ev.Body = bytes.Repeat([]byte("SECRET-BODY "), dedupe.MaxPayload/12+1)
	_, err := s.Accept(context.Background(), claimOf("big"), ev, dedupeTTL)
	expectErr(t, "accept of an event over MaxPayload", err, dedupe.ErrTooLarge)
	if err != nil && (strings.Contains(err.Error(), "SECRET") || len(err.Error()) > 500) {
		t.Errorf("the error carries the request's bytes (%d chars): %.300q", len(err.Error()), err.Error())
	}
	expectNotFound(t, "the refused event", s, "big")
	// The refusal is the event's, not the store's: it works on, and marked nothing done.
	expect(t, "the same ID, small", accept(t, s, claimOf("big"), eventOf("big", clock())), dedupe.Claimed)
}
