package deliver

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// The values of Config.Jitter.
const (
	// JitterProportional moves each delay by a uniform amount within ±25 % of it.
	JitterProportional = "proportional"
	// JitterFull replaces each delay by a uniform one in [0, delay].
	JitterFull = "full"
	// JitterNone keeps each delay as scheduled.
	JitterNone = "none"
)

// The defaults WithDefaults fills in for zero Config fields.
const (
	DefaultMaxAttempts   = 8
	DefaultTimeout       = 30 * time.Second
	DefaultWorkers       = 16
	DefaultJitter        = JitterProportional
	DefaultRetryAfterCap = time.Hour
	DefaultPauseAfter    = 5
	DefaultKeep          = 24 * time.Hour
	DefaultDeadKeep      = 30 * 24 * time.Hour
	DefaultMaxPending    = 100_000
)

// DefaultSchedule is the delay before each retry when Config.Schedule is empty; the last repeats.
var DefaultSchedule = []time.Duration{
	10 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour,
}

// Config says where and how a route's events are delivered. Zero fields take defaults
// (WithDefaults); Validate reports what is wrong with the rest.
type Config struct {
	// Target is the upstream's scheme and host (http or https), with an optional path prefix
	// (usually empty): the event's path and query are appended to it. Required.
	Target *url.URL
	// MaxAttempts is how many attempts an event gets before it becomes a dead letter.
	// Default 8.
	MaxAttempts int
	// Timeout bounds one attempt: connecting, sending the event and reading the answer.
	// Default 30s.
	Timeout time.Duration
	// Workers bounds the attempts in flight at once. Events attempted and not yet recorded (in
	// flight, or answered and waiting for their outcome to be recorded) stay within
	// UnrecordedPerWorker × Workers, and up to 2×Workers may be leased ahead, ready to start,
	// as long as the bodies of those leased ahead and in flight stay within 64 MiB.
	// Default 16.
	Workers int
	// Schedule is the delay before retry k (k = 1, 2, …), before jitter; the last entry repeats.
	// Default 10s, 30s, 2m, 10m, 30m, 2h.
	Schedule []time.Duration
	// Jitter spreads the scheduled delays: "proportional" (uniform within ±25 %), "full"
	// (uniform in [0, delay]) or "none". Default "proportional".
	Jitter string
	// RetryAfterCap is the longest an upstream's Retry-After is honoured. Default 1h.
	RetryAfterCap time.Duration
	// PauseAfter is how many retryable failures in a row, across events, pause the upstream
	// (one probe at a time until an attempt succeeds). Default 5.
	PauseAfter int
	// Keep is how long delivered and superseded events are kept in the outbox. Default 24h.
	Keep time.Duration
	// DeadKeep is how long dead letters are kept for listing and replay. Default 720h (30 days).
	DeadKeep time.Duration
	// MaxPending bounds the route's backlog, its undelivered events: the accepting side refuses
	// new events while the outbox holds that many (dedupe.Claim.MaxPending). The deliverer only
	// reports it. Default 100000: an hour's upstream outage at about 28 events/s, and on disk
	// about 160 MiB of 1 KiB events or 0.9 GiB of 8 KiB ones (a queued event takes its body
	// plus about 0.6 KiB).
	MaxPending int
	// OnDead is what an ordered event that dies does to the events of its key behind it
	// (dedupe.Hold, the zero value: they wait until it is replayed or skipped; dedupe.Skip:
	// the next goes on). It is given to the store with every outcome.
	OnDead dedupe.OnDead
	// Rate, if set, bounds the attempts started (retries and a paused upstream's probes
	// included): at most Rate.Starts in any window of Rate.Per, plus one at its edge; the other
	// events wait queued. On a store that keeps it (dedupe.StartLimiter: Redis) the bound is
	// shared by every node, else it is per process. Default: none (Workers bounds the attempts
	// in flight only).
	Rate Rate
	// Observer, if set, is told each attempt's duration and each event's recorded state.
	Observer Observer
	// Sign, if set, is called with each attempt's request just before it is sent, and the event
	// it carries: it may set headers, such as signatures over a timestamp taken now, so that a
	// retry after a long outage is as fresh as a first attempt. An error fails the attempt
	// without a retry, as a request that cannot be sent. Default: none (headers as received).
	Sign func(req *http.Request, ev *dedupe.Event) error
}

// WithDefaults returns c with every zero field set to its default. Negative values are kept,
// for Validate to report.
func (c Config) WithDefaults() Config {
	setDefault(&c.MaxAttempts, DefaultMaxAttempts)
	setDefault(&c.Timeout, DefaultTimeout)
	setDefault(&c.Workers, DefaultWorkers)
	setDefault(&c.Jitter, DefaultJitter)
	setDefault(&c.RetryAfterCap, DefaultRetryAfterCap)
	setDefault(&c.PauseAfter, DefaultPauseAfter)
	setDefault(&c.Keep, DefaultKeep)
	setDefault(&c.DeadKeep, DefaultDeadKeep)
	setDefault(&c.MaxPending, DefaultMaxPending)
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultSchedule
	}
	c.Schedule = append([]time.Duration(nil), c.Schedule...) // never share the caller's array
	return c
}

// Validate reports every problem of c, with defaults applied, in words and in the names of the
// Caddyfile's forward block (max_attempts, dead_ttl, backoff, …): Target must be an
// absolute http or https URL with a host and no query or fragment; counts and durations must be
// positive; Jitter must be one of the known values.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var problems []error
	report := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf(format, args...))
	}

	if err := validateTarget(c.Target); err != nil {
		problems = append(problems, err)
	}
	positive := []struct {
		name  string
		value int64
	}{
		{"max_attempts", int64(c.MaxAttempts)},
		{"timeout", int64(c.Timeout)},
		{"workers", int64(c.Workers)},
		{"retry_after_cap", int64(c.RetryAfterCap)},
		{"pause_after", int64(c.PauseAfter)},
		{"keep", int64(c.Keep)},
		{"dead_ttl", int64(c.DeadKeep)},
		{"max_pending", int64(c.MaxPending)},
	}
	for _, field := range positive {
		if field.value <= 0 {
			report("%s must be positive, got %d", field.name, field.value)
		}
	}
	for i, delay := range c.Schedule {
		if delay <= 0 {
			report("backoff delay %d must be positive, got %v", i+1, delay)
		}
	}
	if err := c.Rate.validate(); err != nil {
		problems = append(problems, err)
	}
	switch c.Jitter {
	case JitterProportional, JitterFull, JitterNone:
	default:
		report("jitter must be %q, %q or %q, got %q", JitterProportional, JitterFull, JitterNone, c.Jitter)
	}

	return errors.Join(problems...)
}

// validateTarget checks that target can prefix an event's path and query.
func validateTarget(target *url.URL) error {
	switch {
	case target == nil:
		return errors.New("target is required")
	case target.Scheme != "http" && target.Scheme != "https":
		return fmt.Errorf("target %q: scheme must be http or https", target.Redacted())
	case target.Host == "":
		return fmt.Errorf("target %q: host is missing", target.Redacted())
	case target.Opaque != "" || target.RawQuery != "" || target.ForceQuery || target.Fragment != "":
		return fmt.Errorf("target %q: must be only scheme, host and an optional path", target.Redacted())
	}
	return nil
}

// setDefault sets *field to fallback when it is the zero value.
func setDefault[T comparable](field *T, fallback T) {
	var zero T
	if *field == zero {
		*field = fallback
	}
}
