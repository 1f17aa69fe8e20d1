package badgerstore

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Routes whose names are prefixes of one another or hold '@' never share keys with a
// route's queues: each queue leases, lists and counts only its own events, also at open.
func TestRouteNamesThatLookLikeQueues(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	routes := []string{"r", "r@a", "r@", "ra", "r-a", "@a", "", "r\x01@a", "r@a@b"}
	dests := []string{dedupe.DefaultDestination, "a", "b", "a-b"}
	want := map[string]int{}
	for ri, route := range routes {
		for n := range ri%3 + 1 {
			id := "id-" + string(rune('A'+n))
			c := dedupe.Claim{Namespace: route, ID: id, Lease: time.Minute}
			for _, d := range dests[:1+(ri+n)%len(dests)] {
				c.Destinations = append(c.Destinations, dedupe.Destination{Name: d})
				want[dedupe.QueueNamespace(route, d)]++
			}
			ev := queued(id, base)
			ev.Namespace = route
			ev.Body = []byte(route + "/" + id)
			if out := accept(t, b, c, ev); out != dedupe.Claimed {
				t.Fatalf("accept %q %s: %v", route, id, out)
			}
		}
	}
	b = reopen(t, b, dir)
	got, err := b.PendingByNamespace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("PendingByNamespace:\n got %v\nwant %v", got, want)
	}
	for q, n := range want {
		evs, err := b.Lease(context.Background(), q, base, 100, time.Minute)
		if err != nil || len(evs) != n {
			t.Errorf("Lease(%q): %d events, %v; want %d", q, len(evs), err, n)
		}
		route, _ := dedupe.SplitQueueNamespace(q)
		for _, ev := range evs {
			if string(ev.Body) != route+"/"+ev.ID {
				t.Errorf("Lease(%q) handed out %s with body %q", q, ev.ID, ev.Body)
			}
		}
	}
}
