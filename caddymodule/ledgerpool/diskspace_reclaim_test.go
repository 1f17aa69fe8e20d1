package ledgerpool

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// countingStore counts the reclaims the pool asks of the store.
type countingStore struct {
	store
	reclaims atomic.Int64
}

func (c *countingStore) Reclaim(ctx context.Context) error {
	c.reclaims.Add(1)
	return c.store.(reclaimer).Reclaim(ctx)
}

// Below the watermark the pool asks the store to give back the space of delivered bodies, as
// the deliverer polls (no provider need be sending), at most once per reclaimEvery; above it,
// never. Otherwise a drained backlog's space stays taken and accepts stay refused.
func TestLowDiskReclaimsAsTheDelivererPolls(t *testing.T) {
	f := newFakeDisk(t, t.TempDir(), 1<<30)
	ctx := context.Background()
	if _, err := f.pool.Lease(ctx, "r", time.Now(), 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	counting := &countingStore{store: f.pool.ledger}
	f.pool.mu.Lock()
	f.pool.ledger = counting
	f.pool.mu.Unlock()
	for range 5 {
		if _, err := f.pool.Lease(ctx, "r", time.Now(), 1, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if n := counting.reclaims.Load(); n != 0 {
		t.Fatalf("%d reclaims with room on the disk, want none", n)
	}

	f.set(testMinFree - 1)
	for range 20 {
		if _, err := f.pool.Lease(ctx, "r", time.Now(), 1, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	hooktest.WaitFor(t, "the reclaim to end", 10*time.Second, func() bool {
		return f.count(zapcore.InfoLevel, "reclaimed the ledger's disk space") == 1
	})
	if n := counting.reclaims.Load(); n != 1 {
		t.Fatalf("%d reclaims from 20 polls within %v, want 1", n, reclaimEvery)
	}
}
