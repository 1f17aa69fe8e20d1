package redisstore

import (
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func claimOutcome(t *testing.T, s *Store, c dedupe.Claim) dedupe.Outcome {
	t.Helper()
	out, err := s.Claim(ctx, c)
	if err != nil {
		t.Fatalf("Claim %q: %v", c.ID, err)
	}
	return out
}

func TestClaimOutcomesAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	c := claim("evt_1")
	expect(t, "first claim", claimOutcome(t, a, c), dedupe.Claimed)
	expect(t, "claim on the other node while held", claimOutcome(t, b, c), dedupe.InFlight)
	if err := a.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	expect(t, "claim after release", claimOutcome(t, b, c), dedupe.Claimed)
	if err := b.Done(ctx, c, time.Hour); err != nil {
		t.Fatal(err)
	}
	expect(t, "claim of a done ID", claimOutcome(t, a, c), dedupe.Duplicate)
	if err := a.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	expect(t, "claim after releasing a done ID", claimOutcome(t, a, c), dedupe.Duplicate)
}

func TestClaimDigestIsDeduplicatedAlongsideTheID(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := claim("evt_1")
	c.Digest = "sha256:abc"
	expect(t, "first claim", claimOutcome(t, s, c), dedupe.Claimed)
	fresh := claim("evt_fresh_id")
	fresh.Digest = c.Digest
	expect(t, "same bytes under a fresh ID while held", claimOutcome(t, s, fresh), dedupe.InFlight)
	if err := s.Done(ctx, c, time.Hour); err != nil {
		t.Fatal(err)
	}
	expect(t, "same bytes under a fresh ID once done", claimOutcome(t, s, fresh), dedupe.Duplicate)
}

// timedWindow is the lease, dedupe window or version TTL of the timed tests, which look again
// at pastTimedWindow. It is long enough for the check within it to come in time on a loaded
// machine, and not whole seconds: a store that kept it to whole seconds, rounded up, would still
// hold it at pastTimedWindow (a check a loaded machine makes later can miss that, never fail a
// correct store).
const timedWindow, pastTimedWindow = 1200 * time.Millisecond, 1700 * time.Millisecond

// The test sleeps in parallel with the others.
func TestClaimLeaseLapses(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := claim("evt_1")
	c.Lease = timedWindow
	expect(t, "first claim", claimOutcome(t, s, c), dedupe.Claimed)
	expect(t, "claim within the lease", claimOutcome(t, s, c), dedupe.InFlight)
	time.Sleep(pastTimedWindow)
	expect(t, "claim after the lease lapsed", claimOutcome(t, s, c), dedupe.Claimed)
}

func TestDoneExpiresAfterTTL(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := claim("evt_1")
	claimOutcome(t, s, c)
	if err := s.Done(ctx, c, timedWindow); err != nil {
		t.Fatal(err)
	}
	expect(t, "within the dedupe window", claimOutcome(t, s, c), dedupe.Duplicate)
	time.Sleep(pastTimedWindow)
	expect(t, "after the dedupe window", claimOutcome(t, s, c), dedupe.Claimed)
}

func TestClaimStaleVersionsExactlyAtNanoseconds(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// Versions as RFC 3339 times are Unix nanoseconds, beyond what a double tells apart.
	v := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC).UnixNano()
	c := versioned("evt_1", "cus_1", v)
	expect(t, "first", claimOutcome(t, s, c), dedupe.Claimed)
	if err := s.Done(ctx, c, time.Hour); err != nil {
		t.Fatal(err)
	}
	expect(t, "same version, new ID", claimOutcome(t, s, versioned("evt_2", "cus_1", v)), dedupe.Stale)
	expect(t, "1 ns older", claimOutcome(t, s, versioned("evt_3", "cus_1", v-1)), dedupe.Stale)
	expect(t, "1 ns newer", claimOutcome(t, s, versioned("evt_4", "cus_1", v+1)), dedupe.Claimed)
	expect(t, "another entity", claimOutcome(t, s, versioned("evt_5", "cus_2", 1)), dedupe.Claimed)
	// Done never moves a version backwards.
	if err := s.Done(ctx, versioned("evt_6", "cus_1", v-5), time.Hour); err != nil {
		t.Fatal(err)
	}
	expect(t, "after an older Done", claimOutcome(t, s, versioned("evt_7", "cus_1", v)), dedupe.Stale)
	// Negative versions compare as numbers, not as strings.
	if err := s.Done(ctx, versioned("evt_8", "neg", -5), time.Hour); err != nil {
		t.Fatal(err)
	}
	expect(t, "-10 after -5", claimOutcome(t, s, versioned("evt_9", "neg", -10)), dedupe.Stale)
	expect(t, "-4 after -5", claimOutcome(t, s, versioned("evt_10", "neg", -4)), dedupe.Claimed)
}

func TestVersionExpiresVersionTTLAfterItLastAdvanced(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := versioned("evt_1", "cus_1", 5)
	c.VersionTTL = timedWindow
	claimOutcome(t, s, c)
	if err := s.Done(ctx, c, time.Hour); err != nil {
		t.Fatal(err)
	}
	expect(t, "older, within the TTL", claimOutcome(t, s, versioned("evt_2", "cus_1", 4)), dedupe.Stale)
	time.Sleep(pastTimedWindow)
	expect(t, "older, after the TTL", claimOutcome(t, s, versioned("evt_3", "cus_1", 4)), dedupe.Claimed)
}

func TestClaimIsAtomicAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	var mu sync.Mutex
	counts := map[dedupe.Outcome]int{}
	var wg sync.WaitGroup
	for i := range 50 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			out, err := s.Claim(ctx, claim("evt_race"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[out]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[dedupe.Claimed] != 1 || counts[dedupe.InFlight] != 49 {
		t.Fatalf("50 concurrent claims of one ID on two nodes: %v, want 1 claimed and 49 in-flight", counts)
	}
}

func TestClaimRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if _, err := s.Claim(ctx, dedupe.Claim{Namespace: ns, ID: "x"}); err == nil {
		t.Fatal("Claim without a lease: no error")
	}
	if _, err := s.Claim(ctx, dedupe.Claim{Namespace: "a\x00b", ID: "x", Lease: time.Second}); err == nil {
		t.Fatal("Claim in a namespace with a NUL byte: no error")
	}
	if err := s.Done(ctx, claim("x"), 0); err == nil {
		t.Fatal("Done without a ttl: no error")
	}
}
