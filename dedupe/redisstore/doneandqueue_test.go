package redisstore

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// copies is a claim of id (dedupe off when id is "") settled by DoneAndQueue with its event
// queued for the named destinations.
func copies(id string, names ...string) dedupe.Claim {
	c := dedupe.Claim{Namespace: ns}
	if id != "" {
		c = claim(id)
	}
	for _, name := range names {
		c.Destinations = append(c.Destinations, dedupe.Destination{Name: name})
	}
	return c
}

// doneAndQueueAs runs the doneandqueue script as the call of token, as go-redis runs a call
// again after a lost reply: with the same arguments.
func doneAndQueueAs(s *Store, c dedupe.Claim, ev *dedupe.Event, token string) error {
	t, err := s.tag(c.Namespace)
	if err != nil {
		return err
	}
	keys, args := acceptCall(t, c, c.Destinations, ev, time.Hour, token, time.Now())
	return doneAndQueueScript.Run(ctx, s.client, keys, args...).Err()
}

// idsIn leases every event due at now in queue and returns their IDs, sorted.
func idsIn(t *testing.T, s *Store, queue string, now time.Time) []string {
	t.Helper()
	evs, err := s.Lease(ctx, queue, now, 100, time.Minute)
	if err != nil {
		t.Fatalf("Lease(%q): %v", queue, err)
	}
	got := ids(evs)
	slices.Sort(got)
	return got
}

// A DoneAndQueue that Redis ran but whose reply never reached the client (lost, or later than
// the read timeout), run again by the client, succeeds and queues the event once in each
// destination: for one destination (the token in its delivery hash), for several (in the shared
// hash), and for the one destination of several that held no delivery of a reused ID.
func TestRetriedDoneAndQueueQueuesOnce(t *testing.T) {
	t.Parallel()
	for _, stall := range []bool{false, true} {
		p := newDropProxy(t, server.Addr)
		s := New(redis.NewClient(&redis.Options{Addr: p.ln.Addr().String(), MaxRetries: 1, ReadTimeout: 500 * time.Millisecond}), newPrefix())
		t.Cleanup(func() { s.Close() })
		if err := s.DoneAndQueue(ctx, copies("warm-up", "warm"), queued("warm-up", base), time.Hour); err != nil { // the server knows the script
			t.Fatal(err)
		}
		if err := s.DoneAndQueue(ctx, copies("", "billing"), queued("three", base), time.Hour); err != nil {
			t.Fatal(err)
		}
		two := copies("two", "billing", "analytics")
		two.Entity, two.Version = "cus_1", 2
		for _, c := range []dedupe.Claim{copies("one", "billing"), two, copies("", "billing", "analytics")} {
			ev := queued(c.ID, base)
			if c.ID == "" {
				ev.ID = "three" // a resend of an ID billing still holds: analytics alone gets it
			} else if out, err := s.Claim(ctx, c); err != nil || out != dedupe.Claimed {
				t.Fatalf("Claim %q: %v, %v", c.ID, out, err)
			}
			ev.Entity, ev.Version = c.Entity, c.Version
			if stall {
				p.stalled.Store(true)
			} else {
				p.armed.Store(true)
			}
			if err := s.DoneAndQueue(ctx, c, ev, time.Hour); err != nil {
				t.Fatalf("reply stalled %v, %q: DoneAndQueue, its reply lost and run again by the client: %v", stall, ev.ID, err)
			}
			if p.armed.Load() || p.stalled.Load() {
				t.Fatal("no reply was held back")
			}
		}
		for q, want := range map[string][]string{billing: {"one", "three", "two"}, analytics: {"three", "two"}} {
			if got := idsIn(t, s, q, base.Add(time.Second)); !slices.Equal(got, want) {
				t.Errorf("reply stalled %v: %q leased %v, want each event once: %v", stall, q, got, want)
			}
			if n, err := s.Pending(ctx, q); err != nil || n != len(want) {
				t.Errorf("reply stalled %v: Pending(%q): %d, %v; want %d", stall, q, n, err, len(want))
			}
		}
		for _, c := range []dedupe.Claim{claim("one"), versioned("two", "cus_1", 3)} {
			if out, err := s.Claim(ctx, c); err != nil || out != dedupe.Duplicate {
				t.Errorf("Claim %q after DoneAndQueue: %v, %v; want duplicate", c.ID, out, err)
			}
		}
		if out, err := s.Claim(ctx, versioned("older", "cus_1", 2)); err != nil || out != dedupe.Stale {
			t.Errorf("an older version after DoneAndQueue: %v, %v; want stale", out, err)
		}
	}
}

// The same call run twice, as go-redis would after a lost reply: the second run finds the
// event its first run queued and answers ok without a write, for one destination and for
// several; so it succeeds even when Redis has reached maxmemory in between.
func TestDoneAndQueueRunAgainWritesNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	tag, _ := s.tag(ns)
	for _, c := range []dedupe.Claim{copies("one", "billing"), copies("several", "billing", "analytics")} {
		if out, err := s.Claim(ctx, c); err != nil || out != dedupe.Claimed {
			t.Fatalf("Claim %q: %v, %v", c.ID, out, err)
		}
		ev := queued(c.ID, base)
		if err := doneAndQueueAs(s, c, ev, "token-"+c.ID); err != nil {
			t.Fatalf("%q: %v", c.ID, err)
		}
		// A run that wrote would mark the ID done for the dedupe TTL (an hour) again.
		if err := s.client.PExpire(ctx, tag+"i:"+c.ID, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := doneAndQueueAs(s, c, ev, "token-"+c.ID); err != nil {
			t.Fatalf("%q run again: %v", c.ID, err)
		}
		if ttl, err := s.client.PTTL(ctx, tag+"i:"+c.ID).Result(); err != nil || ttl > time.Minute {
			t.Errorf("%q run again wrote: its dedupe record's TTL is %v (%v)", c.ID, ttl, err)
		}
	}
	for q, want := range map[string][]string{billing: {"one", "several"}, analytics: {"several"}} {
		if n, err := s.Pending(ctx, q); err != nil || n != len(want) {
			t.Errorf("Pending(%q): %d, %v; want %d", q, n, err, len(want))
		}
		if got := idsIn(t, s, q, base.Add(time.Second)); !slices.Equal(got, want) {
			t.Errorf("%q leased %v, want %v", q, got, want)
		}
	}
}

// With maxmemory reached under noeviction, DoneAndQueue is refused whole, with an error: nothing
// of the event is in any queue, its ID is still claimed (not done), its version not advanced, and
// the claim can be released. A DoneAndQueue that ran before, run again by the client, still
// succeeds: it writes nothing.
func TestFullMemoryRefusesDoneAndQueueWhole(t *testing.T) {
	t.Parallel()
	srv := fullServer(t, "noeviction")
	s := storeAt(t, srv.Addr, "hookgate")
	tag, _ := s.tag(ns)
	before := copies("before", "billing", "analytics")
	if err := doneAndQueueAs(s, before, bigEvent("before", base, 8<<10), "token"); err != nil {
		t.Fatal(err)
	}
	claims := map[string]dedupe.Claim{"one": copies("one", "billing"), "several": copies("several", "billing", "analytics")}
	for id, c := range claims {
		c.Entity, c.Version = "ent-"+id, 7
		claims[id] = c
		if out, err := s.Claim(ctx, c); err != nil || out != dedupe.Claimed {
			t.Fatalf("Claim %q: %v, %v", id, out, err)
		}
	}
	fill(t, s, false)
	for id, c := range claims {
		ev := bigEvent(id, base, 8<<10)
		ev.Entity, ev.Version = c.Entity, c.Version
		err := s.DoneAndQueue(ctx, c, ev, time.Hour)
		if err == nil || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("DoneAndQueue %q with Redis at maxmemory: %v, want its OOM error", id, err)
		}
		left, err := s.client.Keys(ctx, "*"+id).Result()
		if err != nil || !slices.Equal(left, []string{tag + "i:" + id}) {
			t.Errorf("the refused DoneAndQueue of %q left %q (%v), want its claim alone", id, left, err)
		}
		if v, _ := s.client.Get(ctx, tag+"i:"+id).Result(); !strings.HasPrefix(v, "c") {
			t.Errorf("the refused DoneAndQueue of %q: its dedupe record is %q, want the claim", id, v)
		}
		if n, err := s.client.Exists(ctx, tag+"v:"+c.Entity).Result(); err != nil || n != 0 {
			t.Errorf("the refused DoneAndQueue of %q advanced the version (%v)", id, err)
		}
		if err := s.Release(ctx, c); err != nil {
			t.Errorf("Release %q with Redis at maxmemory: %v", id, err)
		}
	}
	for _, q := range []string{billing, analytics} {
		if n, err := s.Pending(ctx, q); err != nil || n != 1 {
			t.Errorf("Pending(%q): %d, %v; want the event queued before Redis was full", q, n, err)
		}
	}
	if err := doneAndQueueAs(s, before, bigEvent("before", base, 8<<10), "token"); err != nil {
		t.Errorf("the DoneAndQueue run before Redis was full, run again: %v", err)
	}
}

// The deliveries of an event queued by DoneAndQueue beside a destination that keeps an earlier
// event's delivery of the ID share the new body among themselves: the shared hash names them
// alone. The earlier delivery, a dead letter with its body of its own, keeps it.
func TestDoneAndQueueSharesTheBodyAmongTheDestinationsThatGetIt(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	s := storeAt(t, server.Addr, prefix)
	tag, _ := s.tag(ns)
	first := bigEvent("e", base, 1<<10)
	if err := s.DoneAndQueue(ctx, copies("", "billing"), first, time.Hour); err != nil {
		t.Fatal(err)
	}
	settleIn(t, s, billing, "e", dedupe.Dead, time.Hour)
	second := queued("e", base.Add(-time.Second)) // due by the time settleIn leases at
	second.Body = []byte(`{"id":"e","second":true}`)
	if err := s.DoneAndQueue(ctx, copies("", "billing", dedupe.DefaultDestination, "analytics"), second, time.Hour); err != nil {
		t.Fatal(err)
	}
	if names, err := s.client.HGet(ctx, tag+"p:e", fieldDestinations).Result(); err != nil || names != "default analytics" {
		t.Errorf("the shared hash names %q (%v), want the two destinations that got the event", names, err)
	}
	keys := keysOfPrefix(t, s.client, prefix)
	if n := copiesOf(keys, second.Body); n != 1 {
		t.Errorf("the second body is stored %d times, want once", n)
	}
	if got, err := s.Get(ctx, billing, "e"); err != nil || got.State != dedupe.Dead || !bytes.Equal(got.Body, first.Body) {
		t.Fatalf("billing's dead letter: %+v, %v; want it dead with its own body", got, err)
	}
	for _, q := range []string{ns, analytics} {
		settleIn(t, s, q, "e", dedupe.Delivered, time.Hour)
	}
	if n, err := s.client.Exists(ctx, tag+"p:e").Result(); err != nil || n != 0 {
		t.Errorf("the shared body once both its deliveries are delivered: %d keys (%v), want gone", n, err)
	}
	if err := s.Replay(ctx, billing, "e", base); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Lease(ctx, billing, base, 10, time.Minute)
	if err != nil || len(evs) != 1 || !bytes.Equal(evs[0].Body, first.Body) {
		t.Fatalf("billing's replay: %v, %v; want e with its own body", ids(evs), err)
	}
}

// An event queued by DoneAndQueue while an earlier event of its ID still shares its body (a dead
// letter in a destination the new call does not even name) leaves that body alone: each new
// delivery holds its own. The earlier event's body goes with its last delivery, not kept for
// good by a new delivery in a destination it once named.
func TestDoneAndQueueLeavesAnEarlierSharedBodyAlone(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	s := storeAt(t, server.Addr, prefix)
	tag, _ := s.tag(ns)
	first := bigEvent("e", base, 1<<10)
	if err := s.DoneAndQueue(ctx, copies("", "billing", "analytics"), first, time.Hour); err != nil {
		t.Fatal(err)
	}
	settleIn(t, s, billing, "e", dedupe.Dead, time.Hour)
	settleIn(t, s, analytics, "e", dedupe.Delivered, 50*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // analytics' delivery expires; billing's dead letter keeps the body
	if n, err := s.client.Exists(ctx, tag+"@analytics:e:e").Result(); err != nil || n != 0 {
		t.Fatalf("analytics' delivered event did not expire: %d, %v", n, err)
	}

	second := queued("e", base.Add(-time.Second)) // due by the time settleIn leases at
	second.Body = []byte(`{"id":"e","second":true}`)
	if err := s.DoneAndQueue(ctx, copies("", "analytics", dedupe.DefaultDestination), second, time.Hour); err != nil {
		t.Fatal(err)
	}
	if names, err := s.client.HGet(ctx, tag+"p:e", fieldDestinations).Result(); err != nil || names != "billing analytics" {
		t.Errorf("the earlier event's shared hash names %q (%v), want it untouched", names, err)
	}
	for q, want := range map[string][]byte{billing: first.Body, analytics: second.Body, ns: second.Body} {
		if got, err := s.Get(ctx, q, "e"); err != nil || !bytes.Equal(got.Body, want) {
			t.Errorf("Get(%q): %+v, %v; want the body %.30q", q, got, err, want)
		}
	}
	if n := copiesOf(keysOfPrefix(t, s.client, prefix), second.Body); n != 2 {
		t.Errorf("the second body is stored %d times, want once in each of its two deliveries", n)
	}

	if err := s.Replay(ctx, billing, "e", base); err != nil {
		t.Fatal(err)
	}
	settleIn(t, s, billing, "e", dedupe.Delivered, time.Hour) // analytics' new delivery is Pending
	if n, err := s.client.Exists(ctx, tag+"p:e").Result(); err != nil || n != 0 {
		t.Errorf("the earlier event's body once its last delivery is delivered: %d keys (%v), want gone", n, err)
	}
	for _, q := range []string{analytics, ns} {
		evs, err := s.Lease(ctx, q, base, 10, time.Minute)
		if err != nil || len(evs) != 1 || !bytes.Equal(evs[0].Body, second.Body) {
			t.Fatalf("Lease(%q): %v, %v; want e with the second body", q, ids(evs), err)
		}
		evs[0].State = dedupe.Delivered
		if err := s.Update(ctx, evs[0], time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if left := withoutTTL(keysOfPrefix(t, s.client, prefix)); len(left) > 0 {
		t.Errorf("keys left without a TTL once every delivery is final:\n%s", strings.Join(left, "\n"))
	}
}

// What DoneAndQueue costs Redis per event: the scripts it runs (logged).
func TestCostOfDoneAndQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Run(t, redistest.Durable...)
	s := storeAt(t, srv.Addr, newPrefix())
	const events = 100
	for _, dests := range [][]string{{"billing"}, {"billing", "analytics"}} {
		if err := s.client.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for i := range events {
			id := "evt_" + strconv.Itoa(i) + strings.Join(dests, "")
			c := copies(id, dests...)
			if out, err := s.Claim(ctx, c); err != nil || out != dedupe.Claimed {
				t.Fatalf("Claim: %v, %v", out, err)
			}
			if err := s.DoneAndQueue(ctx, c, bigEvent(id, base, 1<<10), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%d destination(s): %.2f scripts per event to claim it and DoneAndQueue it", len(dests), float64(scriptCalls(t, s.client))/events)
	}
}
