package caddymodule

import (
	"context"
	"sync/atomic"
	"time"
)

const (
	// settleTimeout bounds marking an event done or releasing its claim (settle); a claim left
	// unsettled lapses with its lease.
	settleTimeout = 10 * time.Second
	// settleRenewal is how long one settle context is handed out, so each settle gets between
	// settleTimeout−settleRenewal and settleTimeout.
	settleRenewal = time.Second
)

// settleDeadlines hands the settles of all requests one context per settleRenewal, rather than
// each its own: a context with its own timer, detached from the request's, cost every sync-mode
// request five allocations, a fifth of its total. The context carries no value of the request's,
// which the ledgers never read.
var settleDeadlines atomic.Pointer[settleDeadline]

// settleDeadline is one shared settle context.
type settleDeadline struct {
	ctx     context.Context
	cancel  context.CancelFunc
	renewAt time.Time
}

// settleContext returns a context that ends about settleTimeout from now.
func settleContext(now time.Time) context.Context {
	current := settleDeadlines.Load()
	if current != nil && now.Before(current.renewAt) {
		return current.ctx
	}
	next := &settleDeadline{renewAt: now.Add(settleRenewal)}
	next.ctx, next.cancel = context.WithDeadline(context.Background(), now.Add(settleTimeout))
	if !settleDeadlines.CompareAndSwap(current, next) {
		next.cancel() // another settle renewed it first: this one is never handed out
		return settleDeadlines.Load().ctx
	}
	return next.ctx
}
