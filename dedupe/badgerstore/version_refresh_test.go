package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// untilSecond sleeps until the wall clock's Unix second is sec, plus margin.
func untilSecond(sec int64, margin time.Duration) {
	time.Sleep(time.Until(time.Unix(sec, 0).Add(margin)))
}

// The delivered version is meant to expire "with the accepted version"
// (deliveredEntry, docs/configuration.md: "in async mode, the delivered version expires with it"), since it is
// never newer. But deliveredEntry copies the accepted version's expiry at the moment of delivery;
// a later accept of a newer version refreshes the accepted version's TTL and not the delivered
// one's. So the delivered version expires first, while the entity's accepted version is still
// known: an older event still queued (v1 here, postponed or retrying) is then sent to the upstream
// after v2 was delivered, instead of being superseded. Out-of-order delivery is what versions exist
// to prevent.
func TestDeliveredVersionExpiresWithTheRefreshedAcceptedVersion(t *testing.T) {
	t.Parallel()
	b := openTest(t)
	ctx := context.Background()
	queue := func(id string, v int64) dedupe.Outcome {
		c, ev := versionedTTL(id, v), queued(id, base)
		ev.Entity, ev.Version = c.Entity, c.Version
		return accept(t, b, c, ev)
	}
	expect(t, "accept v1", queue("v1", 1), dedupe.Claimed)
	expect(t, "accept v2", queue("v2", 2), dedupe.Claimed)
	t2 := time.Now().Unix() // v2's version expires at t2+3 (Badger's whole seconds)
	evs := lease(t, b, base, 10, time.Minute)
	if len(evs) != 2 {
		t.Fatalf("leased %d events, want 2", len(evs))
	}
	for _, ev := range evs {
		if ev.ID == "v2" {
			ev.State = dedupe.Delivered
			update(t, b, ev, time.Hour)
		} else { // v1 waits: its entity was busy (the deliverer postpones it)
			ev.State, ev.NextAttempt = dedupe.Pending, time.Now().Add(time.Hour)
			update(t, b, ev, 0)
		}
	}
	untilSecond(t2+1, 50*time.Millisecond)
	expect(t, "accept v3 (refreshes the accepted version to t2+4)", queue("v3", 3), dedupe.Claimed)

	untilSecond(t2+3, 100*time.Millisecond)
	expect(t, "an older event while the accepted version is known", queue("old", 1), dedupe.Stale)
	v, ok, err := b.DeliveredVersion(ctx, "stripe", "cus_1")
	if err != nil || !ok || v != 2 {
		t.Fatalf("the entity's accepted version (3) is still known, but DeliveredVersion = %d, %v, %v (want 2): the deliverer would send the queued v1 after v2 rather than supersede it", v, ok, err)
	}
}
