package redisstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func TestListOldestFirstWithCursorAndWithoutBodies(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// Accepted at base+0s (a, z), +1s (m), +2s (b): listed a, z, m, b.
	for _, e := range []struct {
		id string
		at time.Duration
	}{{"b", 2 * time.Second}, {"m", time.Second}, {"z", 0}, {"a", 0}} {
		accept(t, s, claim(e.id), base.Add(e.at))
	}
	var all []string
	after := dedupe.Cursor{}
	for {
		page, err := s.List(ctx, ns, dedupe.Pending, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page {
			if ev.Header != nil || ev.Body != nil || ev.BodyBytes == 0 || ev.Method != "POST" {
				t.Fatalf("listed event: %+v, want no header or body but the rest", ev)
			}
		}
		all = append(all, ids(page)...)
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].After()
	}
	if !slices.Equal(all, []string{"a", "z", "m", "b"}) {
		t.Fatalf("listing in pages of 3: %v, want [a z m b]", all)
	}
	page, _ := s.List(ctx, ns, dedupe.Pending, dedupe.Cursor{AcceptedAt: base.Add(time.Second)}, 10)
	if !slices.Equal(ids(page), []string{"m", "b"}) {
		t.Fatalf("listing from an accept time: %v, want [m b]", ids(page))
	}
	if page, _ := s.List(ctx, ns, dedupe.Dead, dedupe.Cursor{}, 10); len(page) != 0 {
		t.Fatalf("dead listing: %v", ids(page))
	}
	if _, err := s.List(ctx, ns, "lost", dedupe.Cursor{}, 10); err == nil {
		t.Fatal("List of an unknown state: no error")
	}
	if page, _ := s.List(ctx, ns, dedupe.Pending, dedupe.Cursor{}, 0); len(page) != 0 {
		t.Fatal("List with limit 0 returned events")
	}
}

func TestPendingByNamespace(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	odd := "a}b{c%d:e*" // braces, percent, colon and a glob character
	for i, namespace := range []string{"one", "one", odd, "two"} {
		ev := queued(fmt.Sprint("e", i), base)
		ev.Namespace = namespace
		c := claim(ev.ID)
		c.Namespace = namespace
		if _, err := s.Accept(ctx, c, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// A delivered event leaves no backlog; another prefix's namespaces are not this store's.
	evs, err := s.Lease(ctx, "two", base, 1, time.Minute)
	if err != nil || len(evs) != 1 {
		t.Fatal(err)
	}
	evs[0].State = dedupe.Delivered
	if err := s.Update(ctx, evs[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	other := storeAt(t, server.Addr, s.escapedPrefix+"x")
	if _, err := other.Accept(ctx, claim("o"), queued("o", base), time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := s.PendingByNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"one": 2, odd: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PendingByNamespace: %v, want %v", got, want)
	}
	if n, err := s.Pending(ctx, odd); n != 1 || err != nil {
		t.Fatalf("Pending(%q): %d %v", odd, n, err)
	}
}
