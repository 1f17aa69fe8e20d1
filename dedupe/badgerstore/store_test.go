package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

func openTest(t testing.TB) *Store {
	t.Helper()
	return openTestIn(t, t.TempDir())
}

// openTestIn is openTest in dir.
func openTestIn(t testing.TB, dir string) *Store {
	t.Helper()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

func claim(t testing.TB, l dedupe.Ledger, c dedupe.Claim) dedupe.Outcome {
	t.Helper()
	out, err := l.Claim(context.Background(), c)
	if err != nil {
		t.Fatalf("Claim(%+v): %v", c, err)
	}
	return out
}

func done(t testing.TB, l dedupe.Ledger, c dedupe.Claim, ttl time.Duration) {
	t.Helper()
	if err := l.Done(context.Background(), c, ttl); err != nil {
		t.Fatalf("Done(%+v): %v", c, err)
	}
}

func release(t testing.TB, l dedupe.Ledger, c dedupe.Claim) {
	t.Helper()
	if err := l.Release(context.Background(), c); err != nil {
		t.Fatalf("Release(%+v): %v", c, err)
	}
}

func expect(t testing.TB, step string, got, want dedupe.Outcome) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", step, got, want)
	}
}

func event(id string) dedupe.Claim {
	return dedupe.Claim{Namespace: "stripe", ID: id, Lease: time.Minute}
}

func TestConcurrentClaimsExactlyOneWins(t *testing.T) {
	b := openTest(t)
	const n = 32
	// Several rounds, because one round of goroutines does not always overlap
	// enough to produce a conflict.
	for round := range 50 {
		var counts [dedupe.Stale + 1]atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				out, err := b.Claim(context.Background(), event(fmt.Sprint("evt_", round)))
				if err != nil {
					t.Error(err)
					return
				}
				counts[out].Add(1)
			})
		}
		close(start)
		wg.Wait()
		if got := counts[dedupe.Claimed].Load(); got != 1 {
			t.Errorf("round %d: %d goroutines got Claimed, want exactly 1", round, got)
		}
		if got := counts[dedupe.InFlight].Load(); got != n-1 {
			t.Errorf("round %d: %d goroutines got InFlight, want %d", round, got, n-1)
		}
	}
}

func TestClaimDoneRelease(t *testing.T) {
	b := openTest(t)

	c := event("done")
	expect(t, "first claim", claim(t, b, c), dedupe.Claimed)
	expect(t, "claim while held", claim(t, b, c), dedupe.InFlight)
	done(t, b, c, time.Hour)
	expect(t, "claim after done", claim(t, b, c), dedupe.Duplicate)
	release(t, b, c)
	expect(t, "claim after release of a done ID", claim(t, b, c), dedupe.Duplicate)

	r := event("released")
	expect(t, "first claim", claim(t, b, r), dedupe.Claimed)
	release(t, b, r)
	expect(t, "claim after release", claim(t, b, r), dedupe.Claimed)
}

// fakeClock is a store's clock that moves only when the test sets it, so that a check of an
// exact expiry runs at the instant it names, however loaded the machine.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// withFakeClock gives b a clock that stands at its start until set: an hour ahead of the wall
// clock, so that the Badger TTLs behind the store's exact expiries, which Badger compares with
// the wall clock, do not lapse during the test, and half a second past a whole second, so that
// an expiry cut to the whole second would come half a second early. Call it before b is used.
func withFakeClock(b *Store) (clock *fakeClock, start time.Time) {
	start = time.Now().Add(time.Hour).Truncate(time.Second).Add(500 * time.Millisecond)
	clock = &fakeClock{now: start}
	b.clock = clock.Now
	return clock, start
}

func TestLeaseExpires(t *testing.T) {
	b := openTest(t)
	clock, start := withFakeClock(b)
	c := event("lease")
	c.Lease = time.Second

	expect(t, "first claim", claim(t, b, c), dedupe.Claimed)
	// Claims are held in memory with their exact deadline; a 1 s lease must still
	// hold for the full second, not until the second boundary.
	clock.set(start.Add(time.Second - time.Nanosecond))
	expect(t, "claim 1 ns before a 1 s lease ends", claim(t, b, c), dedupe.InFlight)
	clock.set(start.Add(time.Second))
	expect(t, "claim as the lease ends", claim(t, b, c), dedupe.Claimed)
}

func TestDedupeTTLExpires(t *testing.T) {
	b := openTest(t)
	clock, start := withFakeClock(b)
	c := event("ttl")

	expect(t, "first claim", claim(t, b, c), dedupe.Claimed)
	done(t, b, c, time.Second)
	clock.set(start.Add(time.Second - time.Nanosecond))
	expect(t, "claim 1 ns before a 1 s dedupe window ends", claim(t, b, c), dedupe.Duplicate)
	clock.set(start.Add(time.Second))
	expect(t, "claim as the dedupe window ends", claim(t, b, c), dedupe.Claimed)
}

func TestVersions(t *testing.T) {
	b := openTest(t)
	versioned := func(id string, v int64) dedupe.Claim {
		c := event(id)
		c.Entity, c.Version = "cus_1", v
		return c
	}

	done(t, b, versioned("a", 2), time.Hour)
	expect(t, "older version", claim(t, b, versioned("b", 1)), dedupe.Stale)
	expect(t, "same version", claim(t, b, versioned("c", 2)), dedupe.Stale)
	expect(t, "newer version", claim(t, b, versioned("d", 3)), dedupe.Claimed)
	expect(t, "stale claim wrote nothing", claim(t, b, versioned("b", 5)), dedupe.Claimed)

	// Compare-and-advance: a late Done of an older version leaves the newer one.
	done(t, b, versioned("e", 7), time.Hour)
	done(t, b, versioned("f", 6), time.Hour)
	expect(t, "after late Done of 6", claim(t, b, versioned("g", 7)), dedupe.Stale)
	expect(t, "after late Done of 6", claim(t, b, versioned("h", 8)), dedupe.Claimed)

	other := versioned("i", 1)
	other.Entity = "cus_2"
	expect(t, "other entity", claim(t, b, other), dedupe.Claimed)
}

func TestVersionsRFC3339(t *testing.T) {
	b := openTest(t)
	at := func(id, raw string) dedupe.Claim {
		v, err := dedupe.ParseVersion(raw)
		if err != nil {
			t.Fatal(err)
		}
		return dedupe.Claim{Namespace: "shop", ID: id, Entity: "order/9", Version: v, Lease: time.Minute}
	}
	done(t, b, at("a", "2024-05-01T10:00:00.5Z"), time.Hour)
	expect(t, "earlier time", claim(t, b, at("b", "2024-05-01T12:00:00+02:00")), dedupe.Stale)
	expect(t, "later time", claim(t, b, at("c", "2024-05-01T10:00:00.500000001Z")), dedupe.Claimed)
}

func TestWithoutID(t *testing.T) {
	b := openTest(t)
	c := dedupe.Claim{Namespace: "n", Entity: "e", Version: 1}
	expect(t, "first", claim(t, b, c), dedupe.Claimed)
	expect(t, "same version again before Done", claim(t, b, c), dedupe.Claimed)
	done(t, b, c, 0)
	expect(t, "same version after Done", claim(t, b, c), dedupe.Stale)
}

func TestNamespacesIsolate(t *testing.T) {
	b := openTest(t)
	a := dedupe.Claim{Namespace: "github", ID: "42", Lease: time.Minute}
	s := dedupe.Claim{Namespace: "stripe", ID: "42", Lease: time.Minute}
	expect(t, "github", claim(t, b, a), dedupe.Claimed)
	expect(t, "stripe", claim(t, b, s), dedupe.Claimed)
	done(t, b, a, time.Hour)
	release(t, b, s)
	expect(t, "stripe after github done", claim(t, b, s), dedupe.Claimed)
}

func TestDoneSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := event("durable")
	c.Entity, c.Version = "cus_1", 5
	expect(t, "first claim", claim(t, b, c), dedupe.Claimed)
	done(t, b, c, time.Hour)
	b = reopen(t, b, dir)
	expect(t, "claim after reopen", claim(t, b, c), dedupe.Duplicate)
	c.ID = "other"
	expect(t, "version after reopen", claim(t, b, c), dedupe.Stale)
}

func TestInvalidInput(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	if _, err := b.Claim(ctx, dedupe.Claim{Namespace: "a\x00b", ID: "x", Lease: time.Second}); err == nil {
		t.Error("Claim accepted a namespace with NUL")
	}
	if _, err := b.Claim(ctx, dedupe.Claim{Namespace: "a", ID: "x"}); err == nil {
		t.Error("Claim accepted a zero lease")
	}
	if err := b.Done(ctx, event("x"), 0); err == nil {
		t.Error("Done accepted a zero ttl")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Claim(cancelled, event("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Claim with cancelled ctx: err = %v, want context.Canceled", err)
	}
	expect(t, "claim after the cancelled one", claim(t, b, event("x")), dedupe.Claimed)
}

// reopen closes b and opens its directory again, as a restarted process would; the new store is
// closed when the test ends.
func reopen(t testing.TB, b *Store, dir string) *Store {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// The store's clock is an hour ahead of the wall clock Badger drops expired records by, so
// TestDedupeTTLExpires cannot see Badger drop a dedupe record early: this checks the Badger TTL
// behind it instead, which must not lapse before the exact expiry (Badger drops a record once
// the wall clock's whole seconds reach it).
func TestBadgerKeepsADedupeRecordUntilItsExactExpiry(t *testing.T) {
	b := openTest(t)
	_, start := withFakeClock(b)
	c := event("ttl")
	expect(t, "first claim", claim(t, b, c), dedupe.Claimed)
	done(t, b, c, time.Second)
	ids, _, err := keys(c)
	if err != nil {
		t.Fatal(err)
	}
	exact := start.Add(time.Second)
	err = b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(ids[0])
		if err != nil {
			return err
		}
		if at := item.ExpiresAt(); at <= uint64(exact.Unix()) {
			t.Errorf("Badger drops the record at %v, before its exact expiry %v", time.Unix(int64(at), 0), exact)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
