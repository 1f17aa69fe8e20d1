package badgerstore

import (
	"bytes"
	"context"
	"maps"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// threeWays is a claim of id for stripe's default destination, billing and analytics.
func threeWays(id string) dedupe.Claim {
	c := event(id)
	c.Destinations = []dedupe.Destination{{Name: dedupe.DefaultDestination}, {Name: "billing"}, {Name: "analytics"}}
	return c
}

// payloads are the stored payloads of the store's events: each one's expiry and whether it
// still holds its body.
func payloads(t *testing.T, b *Store) (count int, bodies int, withoutExpiry int) {
	t.Helper()
	err := b.db.View(func(txn *badger.Txn) error {
		it := keyIterator(txn, nil)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			ns, ok := namespaceOf(k)
			if !ok || !bytes.HasPrefix(k, append([]byte(ns), 0, kindPayload, 0)) {
				continue
			}
			count++
			if it.Item().ExpiresAt() == 0 {
				withoutExpiry++
			}
			p, err := getPayload(txn, k)
			if err != nil {
				return err
			}
			if len(p.body) > 0 {
				bodies++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return count, bodies, withoutExpiry
}

// An event queued for three destinations stores its request once, under the route; once every
// destination has delivered it, the body is gone and what is left expires.
func TestAnEventForThreeDestinationsStoresItsRequestOnce(t *testing.T) {
	b := openTest(t)
	ev := queued("e", base)
	ev.Body = bytes.Repeat([]byte("x"), 4<<10) // in the value log
	expect(t, "accept", accept(t, b, threeWays("e"), ev), dedupe.Claimed)
	if n, bodies, lasting := payloads(t, b); n != 1 || bodies != 1 || lasting != 1 {
		t.Fatalf("after accept: %d payloads, %d with a body, %d without expiry; want one of each", n, bodies, lasting)
	}
	for i, name := range []string{dedupe.DefaultDestination, "billing", "analytics"} {
		q := dedupe.QueueNamespace("stripe", name)
		evs, err := b.Lease(context.Background(), q, base, 10, time.Minute)
		if err != nil || len(evs) != 1 {
			t.Fatalf("Lease(%q): %d events, %v", q, len(evs), err)
		}
		evs[0].State = dedupe.Delivered
		update(t, b, evs[0], time.Hour)
		n, bodies, lasting := payloads(t, b)
		if last := i == 2; n != 1 || (bodies == 1) == last || (lasting == 1) == last {
			t.Errorf("after %s delivered: %d payloads, %d with a body, %d without expiry", name, n, bodies, lasting)
		}
	}
}

// The backlog of each destination's queue is its own, counted again from the ledger when it is
// opened, and reported under the queue's namespace for the stranded-queue warning.
func TestEachDestinationsBacklogIsCountedAtOpen(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		expect(t, "accept "+id, accept(t, b, threeWays(id), queued(id, base)), dedupe.Claimed)
	}
	enqueue(t, b, queued("other", base)) // the default destination alone
	evs, err := b.Lease(context.Background(), dedupe.QueueNamespace("stripe", "billing"), base, 2, time.Minute)
	if err != nil || len(evs) != 2 {
		t.Fatalf("Lease(billing): %d, %v", len(evs), err)
	}
	for _, ev := range evs {
		ev.State = dedupe.Delivered
		update(t, b, ev, time.Hour)
	}
	want := map[string]int{"stripe": 4, "stripe\x00@billing": 1, "stripe\x00@analytics": 3}
	b = reopen(t, b, dir)
	got, err := b.PendingByNamespace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("PendingByNamespace: %v, want %v", got, want)
	}
	for ns, n := range want {
		if b.Pending(ns) != n {
			t.Errorf("Pending(%q) = %d after reopen, want %d", ns, b.Pending(ns), n)
		}
	}
}

// A provider's resend of an ID past its dedupe window, whose copy is still a dead letter in one
// destination, is copied to the others and shares the stored request with that dead letter,
// which keeps its body until it is replayed and delivered.
func TestACopyOfAReusedIDSharesTheRequestWithItsDeadLetter(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	billing, analytics := dedupe.QueueNamespace("stripe", "billing"), dedupe.QueueNamespace("stripe", "analytics")
	first := dedupe.Claim{Namespace: "stripe", Destinations: []dedupe.Destination{{Name: "billing"}}}
	if err := b.DoneAndQueue(ctx, first, queued("e", base), time.Hour); err != nil {
		t.Fatal(err)
	}
	evs, err := b.Lease(ctx, billing, base, 10, time.Minute)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Lease(billing): %d, %v", len(evs), err)
	}
	evs[0].State = dedupe.Dead
	update(t, b, evs[0], time.Hour)

	again := dedupe.Claim{Namespace: "stripe", Destinations: []dedupe.Destination{{Name: "billing"}, {Name: "analytics"}}}
	if err := b.DoneAndQueue(ctx, again, queued("e", base.Add(time.Second)), time.Hour); err != nil {
		t.Fatal(err)
	}
	evs, err = b.Lease(ctx, analytics, base.Add(time.Second), 10, time.Minute)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Lease(analytics): %d, %v", len(evs), err)
	}
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	dead, err := b.Get(ctx, billing, "e")
	if err != nil || dead.State != dedupe.Dead || len(dead.Body) == 0 {
		t.Fatalf("billing's dead letter once analytics delivered: %+v, %v; want it dead with its body", dead, err)
	}
	if err := b.Replay(ctx, billing, "e", base.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	evs, err = b.Lease(ctx, billing, base.Add(2*time.Second), 10, time.Minute)
	if err != nil || len(evs) != 1 || len(evs[0].Body) == 0 {
		t.Fatalf("billing's replay: %v, %v; want it with its body", evs, err)
	}
}
