package deliver

import (
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Observer is told what a deliverer does, for metrics: caddymodule counts it with Prometheus, so
// this package needs neither. Its methods are called from the workers, concurrently, and must
// return quickly.
type Observer interface {
	// Attempted reports how long one attempt took, from sending to reading the answer.
	Attempted(took time.Duration)
	// Recorded reports an event's new state once it is stored: dedupe.Delivered, dedupe.Dead,
	// dedupe.Superseded, or dedupe.Pending for a failed attempt to be retried.
	Recorded(state dedupe.State)
}

// attempted tells the observer, if any, how long the attempt started at start took.
func (c Config) attempted(start time.Time) {
	if c.Observer != nil {
		c.Observer.Attempted(time.Since(start))
	}
}

// recorded tells the observer, if any, the state an event was stored in.
func (c Config) recorded(state dedupe.State) {
	if c.Observer != nil {
		c.Observer.Recorded(state)
	}
}
