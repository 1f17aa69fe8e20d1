package dedupe

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// deadLetters queues n events with bodies of size bytes and lets them all die with a 502.
func deadLetters(t testing.TB, b *Badger, n, size int) {
	t.Helper()
	for i := range n {
		ev := queued(fmt.Sprintf("evt_%03d", i), base.Add(time.Duration(i)*time.Millisecond))
		ev.Body = bytes.Repeat([]byte("x"), size)
		enqueue(t, b, ev)
	}
	for _, ev := range lease(t, b, base.Add(time.Minute), n, time.Hour) {
		ev.State, ev.Attempts, ev.LastStatus, ev.LastError = Dead, 3, 502, "upstream answered 502"
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
	if _, err := b.List(ctx, "stripe", Dead, Cursor{}, 10); err == nil {
		t.Fatal("List read no payload: it cannot stand for what ListDeliveries saves")
	}

	evs, err := b.ListDeliveries(ctx, "stripe", Dead, Cursor{}, 2)
	if err != nil {
		t.Fatalf("ListDeliveries with the payloads gone: %v", err)
	}
	if len(evs) != 2 || evs[0].ID != "evt_000" || evs[1].ID != "evt_001" {
		t.Fatalf("listed %+v, want the two oldest dead letters", evs)
	}
	ev := evs[0]
	if ev.State != Dead || ev.Attempts != 3 || ev.LastStatus != 502 || ev.LastError != "upstream answered 502" ||
		!ev.AcceptedAt.Equal(base) || ev.UpdatedAt.IsZero() {
		t.Fatalf("listed %+v, want its delivery: dead after 3 attempts, 502, its error and times", ev)
	}
	if ev.Body != nil || ev.Header != nil || ev.Method != "" || ev.BodyBytes != 0 {
		t.Fatalf("listed %+v, want nothing of its request", ev)
	}
	rest, err := b.ListDeliveries(ctx, "stripe", Dead, evs[1].After(), 10)
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
		fn   func(context.Context, string, State, Cursor, int) ([]*Event, error)
	}{{"List", b.List}, {"ListDeliveries", b.ListDeliveries}} {
		bm.Run(list.name, func(bm *testing.B) {
			bm.ReportAllocs()
			for bm.Loop() {
				if evs, err := list.fn(context.Background(), "stripe", Dead, Cursor{}, 100); err != nil || len(evs) != 100 {
					bm.Fatalf("listed %d: %v", len(evs), err)
				}
			}
		})
	}
}
