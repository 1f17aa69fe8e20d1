package caddymodule

import (
	"context"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
)

// outbox is the pool entry as its deliverers' outbox: on Redis it also keeps the routes' rate
// limits, shared by every node (dedupe.StartLimiter); on Badger each deliverer keeps its own.
func (p *pooledLedger) outbox() dedupe.Outbox {
	if p.redis != nil {
		return sharedStarts{p}
	}
	return p
}

// sharedStarts is a Redis pool entry whose routes take their starts from Redis.
type sharedStarts struct{ *pooledLedger }

// TakeStart implements dedupe.StartLimiter.
func (s sharedStarts) TakeStart(ctx context.Context, ns string, interval, ahead time.Duration) (time.Duration, error) {
	l, err := s.open()
	if err != nil {
		return 0, err
	}
	limiter, ok := l.(dedupe.StartLimiter)
	if !ok {
		return 0, fmt.Errorf("hookgate: ledger %s keeps no shared delivery rate", s.name)
	}
	return limiter.TakeStart(ctx, ns, interval, ahead)
}

// TakeStart implements dedupe.StartLimiter within the Redis call budget.
func (r *redisLedger) TakeStart(ctx context.Context, ns string, interval, ahead time.Duration) (time.Duration, error) {
	return within(ctx, r, ns, func(ctx context.Context) (time.Duration, error) { return r.Store.TakeStart(ctx, ns, interval, ahead) })
}

// rateView is a route's delivery rate, for operators.
type rateView struct {
	// Rate is the route's rate limit ("20/s"); absent when it has none.
	Rate string `json:"rate,omitempty"`
	// DrainTime is how long the backlog takes to start at that rate, to the second ("4m0s");
	// absent without a rate.
	DrainTime string `json:"drain_time,omitempty"`
}

// rateOf is what operators see of rate with backlog queued.
func rateOf(rate deliver.Rate, backlog int) rateView {
	if rate == (deliver.Rate{}) {
		return rateView{}
	}
	return rateView{Rate: rate.String(), DrainTime: rate.Drain(backlog).Round(time.Second).String()}
}

// Interface guards
var (
	_ dedupe.StartLimiter = sharedStarts{}
	_ dedupe.StartLimiter = (*redisLedger)(nil)
)
