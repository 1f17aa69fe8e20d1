package deliver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

const (
	// pollInterval is how often the lease loop looks for due events when nothing wakes it sooner.
	pollInterval = time.Second
	// leaseMargin is added to Config.Timeout to make a lease: room for an attempt to record its
	// outcome. An event whose attempt died with its process comes due again after the lease.
	leaseMargin = 30 * time.Second
	// maxLeaseBackoff is the longest the loop waits after failed Leases (doubling from
	// pollInterval) before it tries again.
	maxLeaseBackoff = 30 * time.Second
	// leaseAhead is how many events per worker may wait leased, not yet started. More would
	// make bigger Leases, but an event waits for about leaseAhead attempts per worker before
	// its own starts, and one that waits past its lease's usable part (leaseMargin minus
	// startMargin: 20 s) is leased again for nothing.
	leaseAhead = 2
)

// Status is a Deliverer's state, for operators (the JSON names are for the admin API).
type Status struct {
	// Paused is true while the upstream is taken to be down: one event at a time probes it.
	Paused bool `json:"paused"`
	// ConsecutiveFailures counts the retryable failures in a row, across events, since the
	// last delivered attempt.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// InFlight is the number of events being worked on now: attempted, or their outcome being
	// recorded.
	InFlight int `json:"in_flight"`
	// HeldBytes is the size of the bodies the deliverer holds in memory, in bytes: of the events
	// leased ahead and being sent (an event being recorded holds none). No more is leased while
	// they fill 64 MiB, but one event is always let through, whatever its size.
	HeldBytes int64 `json:"held_bytes"`
}

// settings are the Config in force and what is derived from it; attempts keep the settings
// they started with, so Configure never changes an attempt in flight.
type settings struct {
	cfg    Config
	client *http.Client
	// invalid says why cfg cannot be used; nothing is leased while it is set.
	invalid error
}

// Deliverer sends the queued events of one route (one namespace of an outbox) to its upstream.
// Its methods are safe for concurrent use.
type Deliverer struct {
	out       dedupe.Outbox
	namespace string
	logger    *zap.Logger
	// wake is signalled, without blocking, by Notify, Configure, every started event and every
	// finished attempt, so the lease loop looks for due events now.
	wake chan struct{}
	// attempts counts the events started and not yet recorded, for Stop to wait for.
	attempts sync.WaitGroup
	// idle hands an event's work to a goroutine waiting for it (run).
	idle chan func()

	mu      sync.Mutex
	current *settings
	health  upstreamHealth
	// ready holds the events leased ahead, in the order they are started.
	ready []leasedEvent
	// attempting counts the events holding a worker's slot (the upstream's attempts in flight),
	// recording those whose attempt ended and whose outcome is being recorded.
	attempting, recording int
	// attemptTakes is how long an event holds a worker's slot, on average (0 until one has);
	// usableWait is how long the last leased events could wait to start (see leaseRoom).
	attemptTakes, usableWait time.Duration
	// starts is the route's rate limit (ratelimit.go); permitAt is when the start not yet used
	// was taken (zero: none), rateNext when this node's next start may be free.
	starts             dedupe.StartLimiter
	permitAt, rateNext time.Time
	// permitUsed is when the start dispatch used last was taken, for the event it started.
	permitUsed time.Time
	// rateFailing says the last start could not be taken (logged once until one is).
	rateFailing bool
	// reserved holds the starts reserved ahead in a limiter shared by the nodes.
	reserved reservations
	// heldBytes is the size of the bodies of the events leased ahead and being sent, at most
	// maxHeld but for one event (heldbytes.go); bodyEstimate is how large the next Lease's
	// events are expected to be (0 until a Lease brought one).
	heldBytes, maxHeld, bodyEstimate int64
	// entitiesInWork holds the entities one of whose events is attempted or being recorded.
	entitiesInWork map[string]bool
	// awaitingEntity holds, by entity in work, the ordered events leased meanwhile: each is its
	// key's head, made due by the outcome that ended the one before it, whose entity (often its
	// own) is still being recorded. They start once it is (recorded), rather than being put
	// back in the store for entityBusyDelay, which would pace such a key at one event a second.
	awaitingEntity map[string][]leasedEvent
	started        bool
	stopped        bool
	// Set by Start, for Stop: the lease loop's cancel and end, and the workers' context, which
	// ends only when Stop gives up waiting for them; recordCtx ends outboxTimeout after it, so
	// an outcome being recorded then has that long to finish (see store). One for all events:
	// a context per event to the same end cost each event three allocations.
	stopLeasing     context.CancelFunc
	loopDone        chan struct{}
	attemptsCtx     context.Context
	abandonAttempts context.CancelFunc
	recordCtx       context.Context
}

// New makes a deliverer for one route (namespace) of an outbox. It does nothing until Start.
// cfg takes defaults for its zero fields; if it is still invalid, the error is logged and
// nothing is delivered until Configure brings a valid one. A nil logger logs nothing.
func New(out dedupe.Outbox, namespace string, cfg Config, logger *zap.Logger) *Deliverer {
	if logger == nil {
		logger = zap.NewNop()
	}
	d := &Deliverer{
		out:            out,
		namespace:      namespace,
		logger:         logger,
		wake:           make(chan struct{}, 1),
		idle:           make(chan func()),
		starts:         startsOf(out),
		entitiesInWork: make(map[string]bool),
		awaitingEntity: make(map[string][]leasedEvent),
		maxHeld:        maxHeldBytes,
	}
	d.current = newSettings(cfg, nil)
	d.reserved.rate = d.current.cfg.Rate
	if d.current.invalid != nil {
		d.logger.Error("deliveries held until a valid config arrives", zap.Error(d.current.invalid))
	}
	return d
}

// newSettings applies cfg's defaults and validates it, reusing previous's HTTP client (and its
// idle connections) when the worker count is unchanged.
func newSettings(cfg Config, previous *settings) *settings {
	cfg = cfg.WithDefaults()
	s := &settings{cfg: cfg, invalid: cfg.Validate()}
	if previous != nil && previous.cfg.Workers == cfg.Workers {
		s.client = previous.client
	} else {
		s.client = newClient(cfg.Workers)
	}
	return s
}

// Start launches the lease loop. It runs on its own context (not a request's or a config's)
// until Stop. Calling Start again, or after Stop, does nothing.
func (d *Deliverer) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.stopped {
		return
	}
	d.started = true
	loopCtx, stopLeasing := context.WithCancel(context.Background())
	d.stopLeasing = stopLeasing
	d.loopDone = make(chan struct{})
	d.attemptsCtx, d.abandonAttempts = context.WithCancel(context.Background())
	recordCtx, stopRecording := context.WithCancel(context.Background())
	d.recordCtx = recordCtx
	context.AfterFunc(d.attemptsCtx, func() { time.AfterFunc(outboxTimeout, stopRecording) })
	go d.leaseLoop(loopCtx)
}

// Configure swaps in new settings (a config reload) without dropping, duplicating or stalling
// queued events: the next leases and attempts use them, attempts in flight finish with the old
// ones, and the worker count may grow or shrink. An invalid cfg is logged and ignored.
func (d *Deliverer) Configure(cfg Config) {
	d.mu.Lock()
	previous := d.current
	next := newSettings(cfg, previous)
	if next.invalid != nil && previous.invalid == nil {
		d.mu.Unlock()
		d.logger.Error("new delivery config ignored; the previous one stays", zap.Error(next.invalid))
		return
	}
	d.current = next
	// When a start is free under a new rate, the limiter knows.
	d.rateNext = time.Time{}
	d.reserved.reload(next.cfg.Rate)
	d.dispatch(time.Now()) // the events leased ahead start with the new workers and health
	d.mu.Unlock()

	if next.invalid != nil {
		d.logger.Error("deliveries held until a valid config arrives", zap.Error(next.invalid))
	}
	if next.client != previous.client {
		previous.client.CloseIdleConnections()
	}
	d.Notify()
}

// Notify says an event was just accepted, so the loop looks now instead of at its next poll.
// It never blocks.
func (d *Deliverer) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Stop stops leasing and waits for attempts in flight until ctx ends; then it cancels them and
// returns ctx's error once they have unwound (an outcome already being recorded may finish,
// within outboxTimeout). Events leased but unfinished, or not yet started, come due again
// after their lease. A stopped Deliverer cannot be started again.
func (d *Deliverer) Stop(ctx context.Context) error {
	d.mu.Lock()
	running := d.started && !d.stopped
	d.stopped = true
	for _, next := range d.ready {
		d.dropBody(next.ev) // the other events of its Lease may keep the event itself
		next.lease.ctx.done()
	}
	d.ready = nil // left to their leases
	for entity, waiting := range d.awaitingEntity {
		for _, next := range waiting {
			d.dropBody(next.ev)
			next.lease.ctx.done()
		}
		delete(d.awaitingEntity, entity)
	}
	d.mu.Unlock()
	if !running {
		return nil
	}
	defer d.closeIdleConnections()
	defer d.abandonAttempts()

	d.stopLeasing()
	select {
	case <-d.loopDone:
	case <-ctx.Done():
		return fmt.Errorf("deliver: stop %q: the lease loop did not end in time: %w", d.namespace, ctx.Err())
	}
	finished := make(chan struct{})
	go func() {
		d.attempts.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		d.abandonAttempts()
		<-finished
		return fmt.Errorf("deliver: stop %q: attempts in flight abandoned, their events come due again after their lease: %w",
			d.namespace, ctx.Err())
	}
}

// Status reports the deliverer's state for operators.
func (d *Deliverer) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Status{
		Paused:              d.health.paused,
		ConsecutiveFailures: d.health.consecutiveFailures,
		InFlight:            d.attempting + d.recording,
		HeldBytes:           d.heldBytes,
	}
}

// closeIdleConnections closes the kept-alive connections of the client in use.
func (d *Deliverer) closeIdleConnections() {
	d.mu.Lock()
	client := d.current.client
	d.mu.Unlock()
	client.CloseIdleConnections()
}
