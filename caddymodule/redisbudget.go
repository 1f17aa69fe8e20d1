package caddymodule

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// callBudget bounds each command, its retry and its waits for a pooled connection included, by
// one deadline: with a hung Redis (it accepts connections but never answers) and more requests
// than connections, a request would otherwise wait for a connection, time out, be retried and
// wait again, and the provider would time out before it got its 503.
type callBudget time.Duration

// redisCallBudget is a command's budget under options o: the reply's wait, tried twice.
func redisCallBudget(o *redis.UniversalOptions) callBudget {
	return callBudget(2 * o.ReadTimeout)
}

// DialHook implements redis.Hook.
func (callBudget) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (b callBudget) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(b))
		defer cancel()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (b callBudget) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(b))
		defer cancel()
		return next(ctx, cmds)
	}
}

// Interface guards
var _ redis.Hook = callBudget(0)
