package ledgerpool

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// persistenceCheckTimeout bounds one read of Redis's persistence settings.
const persistenceCheckTimeout = 10 * time.Second

// The persistence check's verdicts besides a warning: settings that keep every acknowledged
// event, and settings Redis refuses to show.
const (
	verdictDurable    = "durable"
	verdictUnreadable = "unreadable"
)

// persistenceCheckKey marks the context of the persistence check's commands, whose own new
// connections call for no other check.
type persistenceCheckKey struct{}

// checkPersistence reads Redis's persistence settings, in the background, after each new
// connection to Redis (so when the store is first used too) (a failover may have put a server with other
// settings behind the client), and logs their verdict when it changed: one WARN when they cannot
// keep the promise that an acknowledged event survives a crash, or when Redis refuses to show
// them (CONFIG denied by an ACL, or renamed by a managed service), else one INFO. A check that
// cannot reach Redis is left to the next connection; it is no outage of the routes, whose own
// calls report one.
func (r *redisLedger) checkPersistence() {
	if !r.connected.Load() || !r.checking.CompareAndSwap(false, true) {
		return
	}
	r.connected.Store(false) // a connection made from now on is checked again
	go func() {
		defer r.checking.Store(false)
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), persistenceCheckKey{}, true), persistenceCheckTimeout)
		defer cancel()
		warning, err := r.Store.CheckPersistence(ctx)
		if err != nil && redisUnreachable(err) && !redis.IsPermissionError(err) {
			return
		}
		verdict := warning
		switch {
		case err != nil:
			verdict = verdictUnreadable
		case warning == "":
			verdict = verdictDurable
		}
		r.verdictMu.Lock()
		changed := verdict != r.verdict
		r.verdict = verdict
		r.verdictMu.Unlock()
		switch {
		case !changed:
		case err != nil:
			r.logger.Warn("could not read Redis's persistence settings; make sure it runs with appendonly yes and appendfsync always, or an acknowledged event can be lost when Redis restarts",
				zap.String("store", r.name), zap.Error(err))
		case warning != "":
			r.logger.Warn(warning, zap.String("store", r.name))
		default:
			r.logger.Info("Redis writes every event to disk before it answers (appendonly yes, appendfsync always)", zap.String("store", r.name))
		}
	}()
}
