package deliver

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// scheduledDelay is the delay before the retry that follows attempt number attempts (1-based):
// schedule[attempts-1], the last entry repeating once the schedule runs out.
func scheduledDelay(schedule []time.Duration, attempts int) time.Duration {
	if len(schedule) == 0 {
		return 0
	}
	return schedule[min(max(attempts, 1), len(schedule))-1]
}

// withJitter spreads delay according to mode (see Config.Jitter); an unknown mode keeps it.
func withJitter(delay time.Duration, mode string) time.Duration {
	if delay <= 0 {
		return 0
	}
	switch mode {
	case JitterFull:
		return time.Duration(rand.Int64N(int64(delay) + 1))
	case JitterProportional:
		quarter := int64(delay) / 4
		return delay - time.Duration(quarter) + time.Duration(rand.Int64N(2*quarter+1))
	}
	return delay
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP-date, as a delay from now.
// A date in the past is a delay of 0. ok is false when the value is absent or neither form.
func parseRetryAfter(value string, now time.Time) (delay time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	seconds, err := strconv.ParseUint(value, 10, 64)
	switch {
	case err == nil && seconds <= uint64(longestDelay/time.Second):
		return time.Duration(seconds) * time.Second, true
	case err == nil || errors.Is(err, strconv.ErrRange):
		return longestDelay, true // any cap applies on top
	}
	when, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0), true
}

// longestDelay is the largest time.Duration; a longer Retry-After is read as this one.
const longestDelay = time.Duration(1<<63 - 1)

// retryDelay is how long to wait before retrying after attempt number attempts failed. An
// upstream's Retry-After (capped at cfg.RetryAfterCap) replaces the schedule, without jitter:
// the upstream knows best when it will be ready, even when that is sooner than the schedule.
// Otherwise it is the scheduled delay with cfg.Jitter.
func retryDelay(cfg Config, attempts int, retryAfter time.Duration, hasRetryAfter bool) time.Duration {
	if hasRetryAfter {
		return min(retryAfter, cfg.RetryAfterCap)
	}
	return withJitter(scheduledDelay(cfg.Schedule, attempts), cfg.Jitter)
}
