package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// deadLetters queues n events with bodies of size bytes and lets them all die with a 502.
func deadLetters(t testing.TB, b *Store, n, size int) {
	t.Helper()
	for i := range n {
		ev := queued(fmt.Sprintf("evt_%03d", i), base.Add(time.Duration(i)*time.Millisecond))
		ev.Body = bytes.Repeat([]byte("x"), size)
		enqueue(t, b, ev)
	}
	for _, ev := range lease(t, b, base.Add(time.Minute), n, time.Hour) {
		ev.State, ev.Attempts, ev.LastStatus, ev.LastError = dedupe.Dead, 3, 502, "upstream answered 502"
		update(t, b, ev, time.Hour)
	}
}

// A dead-letter page refreshes its listing every few seconds: ListDeliveries gives each dead
// letter's delivery without reading its payload, which holds the body. The payloads are deleted
// here behind the store's back: List, which reads them, fails; ListDeliveries does not notice.
func TestListDeliveriesReadsNoPayload(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	deadLetters(t, b, 3, 1<<10)
	if err := b.db.Update(func(txn *badger.Txn) error {
		for i := range 3 {
			ok, _ := keysFor("stripe", fmt.Sprintf("evt_%03d", i))
			if err := txn.Delete(ok.payload); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.List(ctx, "stripe", dedupe.Dead, dedupe.Cursor{}, 10); err == nil {
		t.Fatal("List read no payload: it cannot stand for what ListDeliveries saves")
	}

	evs, err := b.ListDeliveries(ctx, "stripe", dedupe.Dead, dedupe.Cursor{}, 2)
	if err != nil {
		t.Fatalf("ListDeliveries with the payloads gone: %v", err)
	}
	if len(evs) != 2 || evs[0].ID != "evt_000" || evs[1].ID != "evt_001" {
		t.Fatalf("listed %+v, want the two oldest dead letters", evs)
	}
	ev := evs[0]
	if ev.State != dedupe.Dead || ev.Attempts != 3 || ev.LastStatus != 502 || ev.LastError != "upstream answered 502" ||
		!ev.AcceptedAt.Equal(base) || ev.UpdatedAt.IsZero() {
		t.Fatalf("listed %+v, want its delivery: dead after 3 attempts, 502, its error and times", ev)
	}
	if ev.Body != nil || ev.Header != nil || ev.Method != "" || ev.BodyBytes != 0 {
		t.Fatalf("listed %+v, want nothing of its request", ev)
	}
	rest, err := b.ListDeliveries(ctx, "stripe", dedupe.Dead, evs[1].After(), 10)
	if err != nil || len(rest) != 1 || rest[0].ID != "evt_002" {
		t.Fatalf("the next page: %+v, %v; want evt_002", rest, err)
	}
}

// BenchmarkListDeadLetters lists 100 dead letters of 256 KiB each, as the dead-letter page does
// on every refresh: with their payloads (List) and without (ListDeliveries).
func BenchmarkListDeadLetters(bm *testing.B) {
	b := openTest(bm)
	deadLetters(bm, b, 100, 256<<10)
	for _, list := range []struct {
		name string
		fn   func(context.Context, string, dedupe.State, dedupe.Cursor, int) ([]*dedupe.Event, error)
	}{{"List", b.List}, {"ListDeliveries", b.ListDeliveries}} {
		bm.Run(list.name, func(bm *testing.B) {
			bm.ReportAllocs()
			for bm.Loop() {
				if evs, err := list.fn(context.Background(), "stripe", dedupe.Dead, dedupe.Cursor{}, 100); err != nil || len(evs) != 100 {
					bm.Fatalf("listed %d: %v", len(evs), err)
				}
			}
		})
	}
}

// ListDeliveries gives, in every state, the same events in the same order with the same
// delivery as List: the page's listing and the CLI's agree on all but the request.
func TestListDeliveriesEqualsListInEveryState(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	for i := range 12 {
		enqueue(t, b, queued(fmt.Sprintf("evt_%02d", i), base.Add(time.Duration(i)*time.Millisecond)))
	}
	leased := lease(t, b, base.Add(time.Minute), 12, time.Hour)
	if len(leased) != 12 {
		t.Fatalf("leased %d, want 12", len(leased))
	}
	for i, ev := range leased {
		switch i % 4 {
		case 0: // retried: pending again, due later, with its last failure
			ev.State, ev.Attempts, ev.LastStatus, ev.LastError = dedupe.Pending, 2, 503, "upstream answered 503 Service Unavailable"
			ev.NextAttempt = base.Add(time.Hour + time.Duration(i)*time.Second)
		case 1:
			ev.State, ev.Attempts = dedupe.Delivered, 3
		case 2:
			ev.State, ev.Attempts, ev.LastStatus, ev.LastError = dedupe.Dead, 5, 502, "upstream answered 502 Bad Gateway; gave up after 5 attempts"
		case 3:
			ev.State, ev.LastError = dedupe.Superseded, "superseded: version 7 of the entity was already delivered"
		}
		update(t, b, ev, time.Hour)
	}
	// One still leased: pending, in flight, with its lease.
	enqueue(t, b, queued("evt_leased", base.Add(time.Second)))
	if got := lease(t, b, base.Add(2*time.Minute), 1, time.Hour); len(got) != 1 || got[0].ID != "evt_leased" {
		t.Fatalf("leased %s, want evt_leased", ids(got))
	}

	for _, state := range []dedupe.State{dedupe.Pending, dedupe.Delivered, dedupe.Dead, dedupe.Superseded} {
		full, err := b.List(ctx, "stripe", state, dedupe.Cursor{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		deliveries, err := b.ListDeliveries(ctx, "stripe", state, dedupe.Cursor{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(full) == 0 || ids(full) != ids(deliveries) {
			t.Fatalf("%s: List gave [%s], ListDeliveries [%s]", state, ids(full), ids(deliveries))
		}
		for i, ev := range full {
			want := *ev
			want.Entity, want.Version, want.Method, want.URI, want.Scheme, want.BodyBytes = "", 0, "", "", "", 0
			if got := *deliveries[i]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: ListDeliveries gave\n%+v\nwant List's delivery\n%+v", state, ev.ID, got, want)
			}
		}
	}
}

// 10,000 dead letters listed 137 at a time from each page's cursor: each comes exactly once,
// in accept order, by both listings.
func TestListDeliveriesPagesTenThousandDeadLetters(t *testing.T) {
	const n = 10000
	b := openTest(t)
	ctx := context.Background()
	enqueueMany(t, b, "evt", n, base)
	var dead []*dedupe.Event
	for len(dead) < n {
		got := lease(t, b, base.Add(time.Minute), 1000, time.Hour)
		if len(got) == 0 {
			t.Fatalf("leased %d of %d", len(dead), n)
		}
		dead = append(dead, got...)
	}
	concurrently(t, n, func(i int) error {
		dead[i].State, dead[i].Attempts, dead[i].LastStatus, dead[i].LastError = dedupe.Dead, 1, 400, "upstream answered 400 Bad Request: not retried"
		return b.Update(ctx, dead[i], time.Hour)
	})
	for _, list := range []struct {
		name string
		fn   func(context.Context, string, dedupe.State, dedupe.Cursor, int) ([]*dedupe.Event, error)
	}{{"List", b.List}, {"ListDeliveries", b.ListDeliveries}} {
		seen := map[string]bool{}
		var after dedupe.Cursor
		var last *dedupe.Event
		pages := 0
		for {
			page, err := list.fn(ctx, "stripe", dedupe.Dead, after, 137)
			if err != nil {
				t.Fatalf("%s page %d: %v", list.name, pages, err)
			}
			pages++
			for _, ev := range page {
				if seen[ev.ID] {
					t.Fatalf("%s: %s listed twice", list.name, ev.ID)
				}
				if last != nil && (ev.AcceptedAt.Before(last.AcceptedAt) || ev.AcceptedAt.Equal(last.AcceptedAt) && ev.ID < last.ID) {
					t.Fatalf("%s: %s listed after %s", list.name, ev.ID, last.ID)
				}
				seen[ev.ID], last = true, ev
			}
			if len(page) < 137 {
				break
			}
			after = page[len(page)-1].After()
		}
		if len(seen) != n {
			t.Fatalf("%s listed %d of %d dead letters in %d pages", list.name, len(seen), n, pages)
		}
		t.Logf("%s: %d dead letters in %d pages", list.name, len(seen), pages)
	}
}
