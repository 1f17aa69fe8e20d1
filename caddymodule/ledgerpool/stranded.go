package ledgerpool

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

// strandedScanTimeout bounds the count of pending events that WarnStranded makes.
const strandedScanTimeout = time.Minute

// WarnStranded logs one WARN per queue of the store that holds pending events but is not in
// delivering (the queue namespaces of the config's async routes' destinations on it): renaming a
// route (its `name`) or a destination, or making a route sync, leaves its queue behind, and
// nothing would ever deliver it. A config runs it once as it starts, in the background, so a
// large ledger never delays the start.
func (p *Ledger) WarnStranded(logger *zap.Logger, delivering map[string]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), strandedScanTimeout)
	defer cancel()
	l, err := p.open()
	if err != nil {
		return // the routes' own requests report a store that cannot open
	}
	pending, err := l.PendingByNamespace(ctx)
	if err != nil {
		logger.Warn("counting pending events failed", zap.String("store", p.name), zap.Error(err))
		return
	}
	running := map[string]bool{} // routes with a destination delivering
	for ns := range delivering {
		route, _ := dedupe.SplitQueueNamespace(ns)
		running[route] = true
	}
	for ns, n := range pending {
		if delivering[ns] {
			continue
		}
		route, destination := dedupe.SplitQueueNamespace(ns)
		if destination == dedupe.DefaultDestination && !running[route] {
			logger.Warn("pending events in a namespace no async route uses: they are not delivered until a route with `forward` has that name again",
				zap.String("namespace", route), zap.Int("pending", n), zap.String("store", p.name))
			continue
		}
		logger.Warn("pending events in a destination's queue no async route delivers: they are not delivered until the route has a `forward` of that name again",
			zap.String("namespace", route), zap.String("destination", destination), zap.Int("pending", n), zap.String("store", p.name))
	}
}
