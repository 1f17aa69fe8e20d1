package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// versionTTL is short for the tests; Badger keeps TTLs to the second, rounding down, so a version
// advanced at t expires somewhere in (t+versionTTL-1s, t+versionTTL].
const versionTTL = 3 * time.Second

// settle is how long past the latest possible expiry the tests look again.
const settle = 200 * time.Millisecond

func versionedTTL(id string, v int64) dedupe.Claim {
	c := event(id)
	c.Entity, c.Version, c.VersionTTL = "cus_1", v, versionTTL
	return c
}

func TestVersionExpiresAfterVersionTTL(t *testing.T) {
	t.Parallel()
	b := openTest(t)
	done(t, b, versionedTTL("v5", 5), time.Hour)
	advanced := time.Now()
	expect(t, "older event within version_ttl", claim(t, b, versionedTTL("v3", 3)), dedupe.Stale)

	// A stale answer leaves the version's expiry alone: were it refreshed here, the version
	// would still be there after versionTTL from the advance.
	time.Sleep(time.Until(advanced.Add(1500 * time.Millisecond)))
	expect(t, "older event 1.5 s later", claim(t, b, versionedTTL("v4", 4)), dedupe.Stale)

	time.Sleep(time.Until(advanced.Add(versionTTL + settle)))
	expect(t, "older event after version_ttl (no longer known to be stale)", claim(t, b, versionedTTL("v3", 3)), dedupe.Claimed)
}

func TestVersionAdvanceRefreshesTTL(t *testing.T) {
	t.Parallel()
	b := openTest(t)
	done(t, b, versionedTTL("v1", 1), time.Hour)
	first := time.Now()
	time.Sleep(time.Until(first.Add(2 * time.Second)))
	done(t, b, versionedTTL("v2", 2), time.Hour)
	second := time.Now()

	time.Sleep(time.Until(first.Add(versionTTL + settle)))
	expect(t, "version_ttl after the first advance", claim(t, b, versionedTTL("old", 1)), dedupe.Stale)
	time.Sleep(time.Until(second.Add(versionTTL + settle)))
	expect(t, "version_ttl after the second advance", claim(t, b, versionedTTL("old", 1)), dedupe.Claimed)
}

func TestDeliveredVersionExpiresWithAcceptedVersion(t *testing.T) {
	t.Parallel()
	b := openTest(t)
	ctx := context.Background()
	queue := func(id string, v int64) dedupe.Outcome {
		c, ev := versionedTTL(id, v), queued(id, base)
		ev.Entity, ev.Version = c.Entity, c.Version
		return accept(t, b, c, ev)
	}
	expect(t, "accept v5", queue("v5", 5), dedupe.Claimed)
	accepted := time.Now()
	evs := lease(t, b, base, 10, time.Minute)
	if len(evs) != 1 {
		t.Fatalf("leased %d events, want 1", len(evs))
	}
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	if v, ok, err := b.DeliveredVersion(ctx, "stripe", "cus_1"); v != 5 || !ok || err != nil {
		t.Errorf("DeliveredVersion after delivering 5: %d, %v, %v; want 5", v, ok, err)
	}
	expect(t, "older event within version_ttl", queue("v3", 3), dedupe.Stale)

	time.Sleep(time.Until(accepted.Add(versionTTL + settle)))
	if v, ok, err := b.DeliveredVersion(ctx, "stripe", "cus_1"); ok || err != nil {
		t.Errorf("DeliveredVersion after version_ttl: %d, %v, %v; want none", v, ok, err)
	}
	expect(t, "older event after version_ttl", queue("v3", 3), dedupe.Claimed)
}
