package caddymodule

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// strandedScanTimeout bounds the count of pending events that warnStranded makes.
const strandedScanTimeout = time.Minute

// warnStranded logs one WARN per namespace of the store that holds pending events but has no
// async route in this config: renaming a route (its `name`), or making it sync, leaves its
// queue behind, and nothing would ever deliver it. It runs once per config start, in the
// background, so a large ledger never delays the start.
func (a *App) warnStranded(store *pooledLedger, delivering map[string]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), strandedScanTimeout)
	defer cancel()
	l, err := store.open()
	if err != nil {
		return // the routes' own requests report a store that cannot open
	}
	pending, err := l.PendingByNamespace(ctx)
	if err != nil {
		a.logger.Warn("counting pending events failed", zap.String("store", store.name), zap.Error(err))
		return
	}
	for ns, n := range pending {
		if !delivering[ns] {
			a.logger.Warn("pending events in a namespace no async route uses: they are not delivered until a route with `forward` has that name again",
				zap.String("namespace", ns), zap.Int("pending", n), zap.String("store", store.name))
		}
	}
}

// warnStrandedAll starts warnStranded for every store this app's routes use.
func (a *App) warnStrandedAll() {
	byStore := map[*pooledLedger]map[string]bool{}
	for key, r := range a.routes {
		if byStore[r.store] == nil {
			byStore[r.store] = map[string]bool{}
		}
		if r.delivery != nil {
			byStore[r.store][key.name] = true
		}
	}
	for store, delivering := range byStore {
		go a.warnStranded(store, delivering)
	}
}
