package redisstore

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// volumeCount is how many events the volume tests run (VOLUME_EVENTS overrides it).
func volumeCount() int {
	if n, err := strconv.Atoi(os.Getenv("VOLUME_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 2000
}

// deliverAll accepts n events (each its own entity, versions kept for vttl, dedupe records for
// ttl), leases them and records them delivered with keep, as the deliverer would: from
// concurrent callers, as requests and workers would, so the store's auto-pipeliner batches them
// (one at a time, thousands of round trips take seconds on a loaded machine, and the keep of the
// first ones would run out before the last are delivered).
func deliverAll(t *testing.T, s *Store, n int, ttl, vttl, keep time.Duration) {
	t.Helper()
	now := time.Now()
	concurrently(t, n, func(i int) error {
		id := "ev" + strconv.Itoa(i)
		c := claim(id)
		c.Entity, c.Version, c.VersionTTL = "ent"+strconv.Itoa(i), 1, vttl
		ev := queued(id, now)
		ev.Entity, ev.Version = c.Entity, 1
		if out, err := s.Accept(ctx, c, ev, ttl); err != nil || out != dedupe.Claimed {
			return fmt.Errorf("Accept %s: %v %v", id, out, err)
		}
		return nil
	})
	for done := 0; done < n; {
		evs, err := s.Lease(ctx, ns, time.Now(), 1024, time.Minute)
		if err != nil || len(evs) == 0 {
			t.Fatalf("Lease after %d of %d: %d events, %v", done, n, len(evs), err)
		}
		concurrently(t, len(evs), func(i int) error {
			evs[i].State, evs[i].Attempts = dedupe.Delivered, 1
			return s.Update(ctx, evs[i], keep)
		})
		done += len(evs)
	}
}

// concurrently runs do(0) … do(n-1) from 32 goroutines and fails the test with the first error.
func concurrently(t *testing.T, n int, do func(i int) error) {
	t.Helper()
	const callers = 32
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := c; i < n; i += callers {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// keysOf lists the keys of prefix on the server with their TTL, and the size of each sorted set.
func keysOf(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	var out []string
	iter := s.client.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		ttl, _ := s.client.PTTL(ctx, k).Result()
		desc := k + " ttl=" + ttl.String()
		if n, err := s.client.ZCard(ctx, k).Result(); err == nil {
			desc += " zcard=" + strconv.FormatInt(n, 10)
		}
		out = append(out, desc)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// Once every event is delivered and kept for keep, and its dedupe record and version expired,
// nothing of the namespace must be left in Redis: a route that goes quiet (renamed, seasonal,
// a provider that stopped) must not hold memory for good.
func TestNothingLeftAfterKeep(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	s := storeAt(t, server.Addr, prefix)
	n := volumeCount()
	start := time.Now()
	deliverAll(t, s, n, time.Second, time.Second, time.Second)
	t.Logf("%d events accepted, leased and delivered in %v", n, time.Since(start).Round(time.Millisecond))
	time.Sleep(2500 * time.Millisecond) // keep, dedupe TTL and version TTL are 1 s
	left := keysOf(t, s, prefix)
	if len(left) > 0 {
		t.Fatalf("%d keys of the namespace never expire after every event's keep:\n%s", len(left), strings.Join(left, "\n"))
	}
}

// After a quiet spell longer than keep, the listings still hold the members of every expired
// event (only Update trims them, 64 at a time). The admin API's listing of delivered events then
// comes back empty although some are delivered: List gives up after 1000 dead members.
func TestListAfterQuietSpellFindsDeliveredEvents(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	s := storeAt(t, server.Addr, prefix)
	// keep 3 s: longer than the deliveries take, so none of these is trimmed meanwhile.
	deliverAll(t, s, 1500, time.Hour, time.Hour, 3*time.Second)
	time.Sleep(3500 * time.Millisecond) // every event's keep has passed
	now := time.Now()
	for i := range 3 {
		id := "new" + strconv.Itoa(i)
		accept(t, s, claim(id), now)
	}
	evs := lease(t, s, now, 10)
	for _, ev := range evs {
		ev.State, ev.Attempts = dedupe.Delivered, 1
		if err := s.Update(ctx, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	t0, _ := s.tag(ns)
	members, _ := s.client.ZCard(ctx, t0+"s:delivered").Result()
	got, err := s.List(ctx, ns, dedupe.Delivered, dedupe.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("List of delivered events: %v, want the 3 delivered within keep (the listing holds %d members, all but 3 of expired events)",
			ids(got), members)
	}
}
