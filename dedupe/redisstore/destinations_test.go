package redisstore

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// The queues of the route's default destination and two named ones.
var (
	billing     = dedupe.QueueNamespace(ns, "billing")
	analytics   = dedupe.QueueNamespace(ns, "analytics")
	threeQueues = []string{ns, billing, analytics}
)

// threeWays is a claim of id queued for the route's default destination, billing and analytics.
func threeWays(id string) dedupe.Claim {
	c := claim(id)
	c.Destinations = []dedupe.Destination{{Name: dedupe.DefaultDestination}, {Name: "billing"}, {Name: "analytics"}}
	return c
}

// bigEvent is queued(id) with a body of n bytes that no other value in Redis holds.
func bigEvent(id string, at time.Time, n int) *dedupe.Event {
	ev := queued(id, at)
	ev.Body = append([]byte(id+":"), bytes.Repeat([]byte("0123456789abcdef"), n/16)...)
	return ev
}

// storedKey is a key of a prefix as Redis holds it.
type storedKey struct {
	name   string
	ttl    time.Duration // -1: none
	memory int64         // MEMORY USAGE
	values []string      // a string's value, a hash's field values
}

// keysOfPrefix is every key of prefix, with its TTL, memory and values.
func keysOfPrefix(t *testing.T, client redis.UniversalClient, prefix string) []storedKey {
	t.Helper()
	var out []storedKey
	iter := client.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := storedKey{name: iter.Val()}
		k.ttl, _ = client.PTTL(ctx, k.name).Result()
		k.memory, _ = client.MemoryUsage(ctx, k.name, 0).Result()
		switch typ, _ := client.Type(ctx, k.name).Result(); typ {
		case "string":
			v, _ := client.Get(ctx, k.name).Result()
			k.values = []string{v}
		case "hash":
			h, _ := client.HGetAll(ctx, k.name).Result()
			k.values = slices.Collect(maps.Values(h))
		}
		out = append(out, k)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// copiesOf is how many values of keys are exactly body.
func copiesOf(keys []storedKey, body []byte) int {
	n := 0
	for _, k := range keys {
		for _, v := range k.values {
			if v == string(body) {
				n++
			}
		}
	}
	return n
}

// withoutTTL names the keys that never expire.
func withoutTTL(keys []storedKey) []string {
	var out []string
	for _, k := range keys {
		if k.ttl < 0 {
			out = append(out, k.name)
		}
	}
	return out
}

func memoryOf(keys []storedKey) int64 {
	var n int64
	for _, k := range keys {
		n += k.memory
	}
	return n
}

// settleIn leases event id from queue and records state, kept for keep.
func settleIn(t *testing.T, s *Store, queue, id string, state dedupe.State, keep time.Duration) {
	t.Helper()
	evs, err := s.Lease(ctx, queue, base, 10, time.Minute)
	if err != nil || len(evs) != 1 || evs[0].ID != id {
		t.Fatalf("Lease(%q): %v, %v; want %s", queue, ids(evs), err, id)
	}
	evs[0].State, evs[0].Attempts = state, 1
	if err := s.Update(ctx, evs[0], keep); err != nil {
		t.Fatalf("Update(%q, %s): %v", queue, state, err)
	}
}

// An event queued for three destinations is stored with its body once, in Redis's memory about
// as much as an event for one destination; once each destination has delivered it, its body is
// gone and every key it left expires.
func TestAnEventForThreeDestinationsKeepsItsBodyOnce(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	oneWay := newPrefix()
	s := storeAt(t, server.Addr, oneWay)
	if out, err := s.Accept(ctx, claim("e"), bigEvent("e", base, size), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept for one destination: %v, %v", out, err)
	}
	single := memoryOf(keysOfPrefix(t, s.client, oneWay))

	prefix := newPrefix()
	s = storeAt(t, server.Addr, prefix)
	ev := bigEvent("e", base, size)
	if out, err := s.Accept(ctx, threeWays("e"), ev, time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept for three destinations: %v, %v", out, err)
	}
	keys := keysOfPrefix(t, s.client, prefix)
	if n := copiesOf(keys, ev.Body); n != 1 {
		t.Fatalf("the body is stored %d times, want once", n)
	}
	three := memoryOf(keys)
	t.Logf("one event of %d bytes in Redis: %d bytes for one destination, %d for three", len(ev.Body), single, three)
	if three > single+4<<10 {
		t.Errorf("an event for three destinations takes %d bytes of Redis, one for one destination %d: more than a body's worth of keys apart", three, single)
	}

	for _, q := range threeQueues {
		settleIn(t, s, q, "e", dedupe.Delivered, time.Hour)
	}
	keys = keysOfPrefix(t, s.client, prefix)
	if n := copiesOf(keys, ev.Body); n != 0 {
		t.Errorf("the body is still stored %d times once every destination delivered it", n)
	}
	if left := withoutTTL(keys); len(left) > 0 {
		t.Errorf("keys left without a TTL once every destination delivered:\n%s", strings.Join(left, "\n"))
	}
	for _, q := range threeQueues {
		got, err := s.Get(ctx, q, "e")
		if err != nil || got.State != dedupe.Delivered || got.Body != nil || got.Header != nil || got.BodyBytes != len(ev.Body) ||
			got.URI != ev.URI || got.Method != ev.Method {
			t.Errorf("Get(%q) once delivered: %+v, %v", q, got, err)
		}
	}
}

// A dead letter keeps the shared body as long as it is kept itself, the longest-kept one of
// them; a replay keeps it for good again, and its delivery lets it go with the last dead letter.
func TestSharedBodyLastsAsLongAsTheLatestDeadLetter(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	s := storeAt(t, server.Addr, prefix)
	ev := bigEvent("e", base, 1<<10)
	if out, err := s.Accept(ctx, threeWays("e"), ev, time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept: %v, %v", out, err)
	}
	tag, _ := s.tag(ns)
	shared := tag + "p:e"
	ttl := func(step string, want time.Duration) {
		t.Helper()
		got, err := s.client.PTTL(ctx, shared).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want < 0 && got != want || want >= 0 && (got > want || got < want-time.Minute) {
			t.Errorf("%s: the shared body's TTL is %v, want %v", step, got, want)
		}
	}
	settleIn(t, s, billing, "e", dedupe.Dead, 3*time.Hour)
	ttl("billing dead, the others pending", -1)
	settleIn(t, s, analytics, "e", dedupe.Dead, time.Hour)
	settleIn(t, s, ns, "e", dedupe.Superseded, 5*time.Hour)
	ttl("dead for 3 h and 1 h, superseded for 5 h", 3*time.Hour)
	for q, want := range map[string]bool{ns: false, billing: true, analytics: true} {
		got, err := s.Get(ctx, q, "e")
		if err != nil || (got.Body != nil) != want || (got.Header != nil) != want {
			t.Errorf("Get(%q): %+v, %v; want its body: %v", q, got, err, want)
		}
	}
	if err := s.Replay(ctx, billing, "e", base); err != nil {
		t.Fatal(err)
	}
	ttl("billing replayed", -1)
	settleIn(t, s, billing, "e", dedupe.Delivered, time.Hour)
	ttl("billing delivered, analytics dead for 1 h", time.Hour)
	if left := withoutTTL(keysOfPrefix(t, s.client, prefix)); len(left) > 0 {
		t.Errorf("keys left without a TTL once every delivery is final:\n%s", strings.Join(left, "\n"))
	}
}

// Every destination's queue is counted on its own, under its queue's namespace.
func TestPendingByNamespaceCountsEachDestinationsQueue(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	accept := func(c dedupe.Claim) {
		t.Helper()
		if out, err := s.Accept(ctx, c, queued(c.ID, base), time.Hour); err != nil || out != dedupe.Claimed {
			t.Fatalf("Accept %s: %v, %v", c.ID, out, err)
		}
	}
	accept(threeWays("a"))
	accept(threeWays("b"))
	accept(claim("plain"))
	onlyBilling := claim("billed")
	onlyBilling.Destinations = []dedupe.Destination{{Name: "billing"}}
	accept(onlyBilling)
	got, err := s.PendingByNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{ns: 3, billing: 3, analytics: 2}
	if !maps.Equal(got, want) {
		t.Errorf("PendingByNamespace: %v, want %v", got, want)
	}
	for q, n := range want {
		if pending, err := s.Pending(ctx, q); err != nil || pending != n {
			t.Errorf("Pending(%q): %d, %v; want %d", q, pending, err, n)
		}
	}
}

// What an event costs Redis: its keys' memory once accepted, and the scripts run to accept,
// lease and deliver it, for one destination and for three (logged; see the package's report).
func TestCostOfAnEventByDestinations(t *testing.T) {
	t.Parallel()
	srv := redistest.Run(t, redistest.Durable...)
	const events = 100
	for _, dests := range []int{1, 3} {
		prefix := newPrefix()
		s := storeAt(t, srv.Addr, prefix)
		if err := s.client.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		queues := threeQueues[:dests]
		for i := range events {
			id := "evt_" + strconv.Itoa(i)
			c := claim(id)
			if dests > 1 {
				c = threeWays(id)
			}
			if out, err := s.Accept(ctx, c, bigEvent(id, base, 1<<10), time.Hour); err != nil || out != dedupe.Claimed {
				t.Fatalf("Accept: %v, %v", out, err)
			}
		}
		keys := keysOfPrefix(t, s.client, prefix)
		var own int64 // the keys of one event alone
		for _, k := range keys {
			if strings.HasSuffix(k.name, ":evt_7") {
				own += k.memory
			}
		}
		accepted := scriptCalls(t, s.client)
		for _, q := range queues {
			evs, err := s.Lease(ctx, q, base, events, time.Minute)
			if err != nil || len(evs) != events {
				t.Fatalf("Lease(%q): %d, %v", q, len(evs), err)
			}
			for _, ev := range evs {
				ev.State = dedupe.Delivered
				if err := s.Update(ctx, ev, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
		}
		calls := scriptCalls(t, s.client)
		t.Logf("%d destination(s), 1 KiB bodies: %d bytes of Redis per event with its queues' keys (%d for its own keys), %.2f scripts per event to accept it, %.2f to accept and deliver it (leased %d at a time)",
			dests, memoryOf(keys)/events, own, float64(accepted)/events, float64(calls)/events, events)
		if left := withoutTTL(keysOfPrefix(t, s.client, prefix)); len(left) > 0 {
			t.Errorf("%d destination(s): keys left without a TTL once delivered:\n%s", dests, strings.Join(left, "\n"))
		}
	}
}

// scriptCalls is the number of scripts the server ran since its stats were reset.
func scriptCalls(t *testing.T, client redis.UniversalClient) int {
	t.Helper()
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd+"calls="); ok {
				calls, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				n += calls
			}
		}
	}
	return n
}

// An event whose shared header and body are gone from Redis (evicted, deleted by hand, lost in a
// failover) is gone from each of its queues as Lease meets it, reported as such, and no longer
// counted as Pending; its dead letter cannot be replayed.
func TestAnEventWhoseSharedBodyIsGoneIsDroppedFromItsQueues(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	reported := map[string]int{}
	s.OnGoneEvents(func(namespace string, n int) { reported[namespace] += n })
	if out, err := s.Accept(ctx, threeWays("e"), queued("e", base), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept: %v, %v", out, err)
	}
	settleIn(t, s, analytics, "e", dedupe.Dead, time.Hour)
	tag, _ := s.tag(ns)
	if err := s.client.Del(ctx, tag+"p:e").Err(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{ns, billing} {
		if got, err := s.Lease(ctx, q, base, 10, time.Minute); err != nil || len(got) != 0 {
			t.Fatalf("Lease(%q): %v, %v; want nothing handed out without its body", q, ids(got), err)
		}
		if n, err := s.Pending(ctx, q); err != nil || n != 0 {
			t.Errorf("Pending(%q) once its event is found gone: %d, %v", q, n, err)
		}
		if reported[q] != 1 {
			t.Errorf("gone events reported for %q: %d, want 1", q, reported[q])
		}
	}
	if err := s.Replay(ctx, analytics, "e", base); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("Replay of the dead letter without its body: %v, want ErrNotFound", err)
	}
}

// A queue's namespace names a route and a destination as dedupe.QueueNamespace makes them: a
// bad destination name, or the default destination named, is an error, not another queue.
func TestAQueueNamespaceNamesAValidDestination(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for _, bad := range []string{ns + "\x00@a/b", ns + "\x00@", ns + "\x00@" + dedupe.DefaultDestination, ns + "\x00@x\x00@y"} {
		if _, err := s.Lease(ctx, bad, base, 1, time.Minute); err == nil {
			t.Errorf("Lease(%q): no error", bad)
		}
		if _, err := s.Get(ctx, bad, "e"); err == nil || errors.Is(err, dedupe.ErrNotFound) {
			t.Errorf("Get(%q): %v, want an error of the namespace", bad, err)
		}
	}
}

// With maxmemory reached under noeviction, an event for several destinations is refused whole:
// nothing of it is left in any queue nor in the route (its ID is not marked done), and each
// destination's deliverer can still lease and record deliveries, which frees the memory.
func TestFullMemoryRefusesAnEventForSeveralDestinationsWhole(t *testing.T) {
	t.Parallel()
	srv := fullServer(t, "noeviction")
	s := storeAt(t, srv.Addr, "hookgate")
	refused := ""
	for i := 0; i < 2000 && refused == ""; i++ {
		id := "ev" + strconv.Itoa(i)
		out, err := s.Accept(ctx, threeWays(id), bigEvent(id, base, 8<<10), time.Hour)
		switch {
		case err != nil && strings.Contains(err.Error(), "OOM"):
			refused = id
		case err != nil || out != dedupe.Claimed:
			t.Fatalf("Accept %s: %v, %v", id, out, err)
		}
	}
	if refused == "" {
		t.Fatal("Redis never ran out of memory")
	}
	if left, err := s.client.Keys(ctx, "*"+refused).Result(); err != nil || len(left) > 0 {
		t.Fatalf("the refused event %s left %q (%v)", refused, left, err)
	}
	for _, q := range []string{billing, analytics} {
		evs, err := s.Lease(ctx, q, base.Add(time.Minute), 4, time.Minute)
		if err != nil || len(evs) == 0 {
			t.Fatalf("Lease(%q) with Redis at maxmemory: %v, %v", q, ids(evs), err)
		}
		evs[0].State, evs[0].Attempts = dedupe.Delivered, 1
		if err := s.Update(ctx, evs[0], time.Hour); err != nil {
			t.Fatalf("recording a delivery to %q with Redis at maxmemory: %v", q, err)
		}
	}
}
