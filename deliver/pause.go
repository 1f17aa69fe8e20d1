package deliver

import "time"

// upstreamHealth decides, from the outcomes of attempts across events, whether the upstream is
// down. After pauseAfter retryable failures in a row it is paused: one event at a time probes
// it, and each probe waits until the retry time the last failure was given (its backoff, or
// the upstream's Retry-After), so a queue of events does not spend its attempts on an
// upstream that is down. The first delivered attempt resumes full concurrency. Answers that
// reject an event (a 404, say) neither count as failures nor resume: they say nothing about
// whether the upstream is up. It is not safe for concurrent use; the Deliverer guards it.
type upstreamHealth struct {
	consecutiveFailures int
	paused              bool
	// probeNotBefore is when a paused upstream may be probed again.
	probeNotBefore time.Time
}

// failed records a retryable failure whose event is due again at retryAt, and reports whether
// it paused the upstream.
func (h *upstreamHealth) failed(pauseAfter int, retryAt time.Time) (paused bool) {
	h.consecutiveFailures++
	h.probeNotBefore = retryAt
	if h.paused || h.consecutiveFailures < pauseAfter {
		return false
	}
	h.paused = true
	return true
}

// succeeded records a delivered attempt, and reports whether it resumed a paused upstream.
func (h *upstreamHealth) succeeded() (resumed bool) {
	resumed = h.paused
	*h = upstreamHealth{}
	return resumed
}

// slots is how many more events may be leased now, with inFlight attempts running and workers
// allowed, and, when none may, how long until a paused upstream may be probed (0 if unknown).
func (h *upstreamHealth) slots(workers, inFlight int, now time.Time) (free int, probeIn time.Duration) {
	if !h.paused {
		return max(workers-inFlight, 0), 0
	}
	if wait := h.probeNotBefore.Sub(now); wait > 0 {
		return 0, wait
	}
	if inFlight > 0 {
		return 0, 0
	}
	return 1, 0
}
