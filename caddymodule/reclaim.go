package caddymodule

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// reclaimEvery is the least time between two reclaims while the disk stays below its watermark:
// each one compacts and rewrites, which is worth it only once more has been delivered.
const reclaimEvery = 10 * time.Second

// reclaimWhileLow asks the open store to give back the space of delivered bodies now
// (badgerstore.Store.Reclaim), in the background, when the disk is below its watermark. Without
// it a drained backlog's space comes back only when Badger compacts on its own, which a
// refused-accepts gateway may never do, so accepts would stay refused.
func (p *pooledLedger) reclaimWhileLow() {
	if p.disk.admit() == nil {
		return
	}
	p.mu.Lock()
	l, ok := p.ledger.(reclaimer)
	if !ok || p.reclaiming || time.Since(p.reclaimedAt) < reclaimEvery {
		p.mu.Unlock()
		return
	}
	p.reclaiming = true
	p.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		began := time.Now()
		err := l.Reclaim(ctx)
		p.mu.Lock()
		p.reclaiming, p.reclaimedAt = false, time.Now()
		p.mu.Unlock()
		if err != nil {
			p.logger.Warn("reclaiming the ledger's disk space failed", zap.String("dir", p.dir), zap.Error(err))
			return
		}
		avail, _ := p.disk.free(p.dir)
		p.logger.Info("reclaimed the ledger's disk space of delivered events", zap.String("dir", p.dir),
			zap.Duration("took", time.Since(began)), zap.Uint64("free_bytes", avail))
	}()
}
