package badgerstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// A listing of dead letters holds their delivery facts, never their bodies and headers, and
// resumes after a cursor, so a route with a day of dead letters is read a page at a time.
func TestListPagesWithoutBodies(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	const n = 7
	for i := range n {
		at := base.Add(time.Duration(i/2) * time.Second) // pairs share an accept time, then sort by ID
		enqueue(t, b, queued(fmt.Sprintf("evt_%d", i), at))
	}
	for _, ev := range lease(t, b, base.Add(time.Minute), n, time.Hour) {
		ev.State, ev.LastStatus = dedupe.Dead, 404
		update(t, b, ev, time.Hour)
	}

	var got []string
	var after dedupe.Cursor
	for page := 0; ; page++ {
		evs, err := b.List(ctx, "stripe", dedupe.Dead, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Body != nil || ev.Header != nil {
				t.Fatalf("listed %s with its body %q and headers %v", ev.ID, ev.Body, ev.Header)
			}
			if ev.BodyBytes == 0 || ev.LastStatus != 404 || ev.Method == "" {
				t.Fatalf("listed %s without its delivery facts: %+v", ev.ID, ev)
			}
			got = append(got, ev.ID)
			after = ev.After()
		}
		if len(evs) < 3 {
			break
		}
		if page > n {
			t.Fatal("the pages never end")
		}
	}
	if fmt.Sprint(got) != "[evt_0 evt_1 evt_2 evt_3 evt_4 evt_5 evt_6]" {
		t.Fatalf("pages listed %v, want each event once in accept order", got)
	}
	full, err := b.Get(ctx, "stripe", "evt_3")
	if err != nil || len(full.Body) == 0 || full.Header == nil {
		t.Fatalf("Get after listing: %+v, %v; want the body and headers kept for replay", full, err)
	}
}

// Pending events are counted by namespace, so a route renamed away from its queue is noticed.
func TestPendingByNamespace(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	for _, ns := range []string{"a", "a", "a", "b", "c", "a\x01b"} {
		ev := queued(fmt.Sprintf("evt_%s_%d", ns, time.Now().UnixNano()), base)
		ev.Namespace = ns
		expect(t, "accept", accept(t, b, dedupe.Claim{Namespace: ns}, ev), dedupe.Claimed)
	}
	evs, err := b.Lease(ctx, "b", base.Add(time.Minute), 10, time.Hour)
	if err != nil || len(evs) != 1 {
		t.Fatalf("lease b: %v, %v", evs, err)
	}
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	done(t, b, dedupe.Claim{Namespace: "sync", ID: "evt_sync"}, time.Hour)

	got, err := b.PendingByNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]int{"a": 3, "a\x01b": 1, "c": 1}) {
		t.Fatalf("pending by namespace: %v", got)
	}
}
