package ledgerpool

import (
	"context"
	"sync/atomic"
)

// within runs one call to the Redis store with a deadline of r.budget, and answers at the
// deadline even if the call has not returned. A script queued on the client's auto-pipeliner
// waits for its batch rather than for its context, and a command that times out is retried
// after waiting for a connection again; with a hung Redis (it accepts connections but never
// answers) and more requests than connections, a request would otherwise be held past the
// provider's timeout instead of getting its 503. A call answered 503 at the deadline may still
// complete: an event it queued is then a duplicate to the provider's retry, never lost.
// ns is the namespace the call is about, "" for none: what an outage it meets concerns (observe).
func within[T any](ctx context.Context, r *redisLedger, ns string, call func(context.Context) (T, error)) (T, error) {
	return withinOr(ctx, r, ns, call, nil)
}

// withinOr is within, with late run on what the call returns if it completes after the caller
// was answered at the deadline: it can undo what no request is waiting for any more.
func withinOr[T any](ctx context.Context, r *redisLedger, ns string, call func(context.Context) (T, error), late func(T, error)) (T, error) {
	bounded, cancel := context.WithTimeout(ctx, r.budget)
	type result struct {
		value T
		err   error
	}
	const (
		pending = iota
		answered
		gaveUp
	)
	var state atomic.Int32
	done := make(chan result, 1)
	go func() {
		defer cancel()
		value, err := call(bounded)
		if state.CompareAndSwap(pending, answered) {
			done <- result{value, err}
		} else if late != nil {
			late(value, err)
		}
	}()
	select {
	case res := <-done:
		return res.value, r.observe(ctx, ns, res.err)
	case <-bounded.Done():
		if !state.CompareAndSwap(pending, gaveUp) {
			res := <-done // it answered just in time
			return res.value, r.observe(ctx, ns, res.err)
		}
		var zero T
		return zero, r.observe(ctx, ns, bounded.Err())
	}
}

// run is within for a call that returns only an error.
func (r *redisLedger) run(ctx context.Context, ns string, call func(context.Context) error) error {
	_, err := within(ctx, r, ns, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}
