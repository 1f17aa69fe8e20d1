package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/verify"
)

// The module's counters and histograms live as long as the process, so a reload neither resets
// them nor registers them twice: each config registers the same collectors on its own registry
// (registerMetrics). Their labels are the route's name and small fixed sets of words, never an
// event ID, an entity or an address.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookgate_requests_total",
		Help: "Webhook requests answered, by route, outcome (accepted, duplicate, stale, ignored, rejected, busy, handshake, released), reason class of a refusal, and mode (enforce; monitor: only classified, every request handed on).",
	}, []string{"route", "outcome", "reason", "mode"})
	verifySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hookgate_verify_seconds",
		Help:    "Time taken to verify a request's signature and timestamp, by route.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 8), // 10 µs (an HMAC) to 0.16 s
	}, []string{"route"})
	deliveriesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookgate_deliveries_total",
		Help: "Events' recorded delivery outcomes, by route and result (delivered, retry, dead, superseded).",
	}, []string{"route", "result"})
	deliverySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hookgate_delivery_seconds",
		Help:    "Time taken by one delivery attempt to the upstream, by route.",
		Buckets: append(prometheus.DefBuckets, 30),
	}, []string{"route"})
)

// The reason classes of refusals: a small fixed set, where the answer's body has the words.
const (
	reasonSignature    = "signature"      // missing, malformed or not matching
	reasonTimestamp    = "timestamp"      // missing, malformed, stale or in the future
	reasonMalformed    = "malformed"      // the body could not be read
	reasonBodyTooLarge = "body_too_large" // over max_body, or too large to queue
	reasonBadEvent     = "bad_event"      // no event ID, entity or version where the route needs one
	reasonOther        = "other"
	reasonLedgerDown   = "ledger_unavailable"
	reasonDiskLow      = "disk_low"
	reasonBacklogFull  = "backlog_full"
	reasonBodyBudget   = "body_budget"
	reasonInFlight     = "in_flight"   // the same event ID is still being processed (409)
	reasonClientGone   = "client_gone" // the provider hung up before the ledger answered
)

// registerMetrics registers the module's collectors on the config's registry, and a collector of
// the app's routes' queues, upstreams and disks read on each scrape. A collector this config
// already registered is kept.
func registerMetrics(ctx caddy.Context, app *App) error {
	registry := ctx.GetMetricsRegistry()
	if registry == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{requestsTotal, verifySeconds, deliveriesTotal, deliverySeconds,
		ledgerCommitSeconds, ledgerCommitRequests, &routesCollector{app: app}} {
		if err := registry.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return fmt.Errorf("hookgate: registering metrics: %w", err)
			}
		}
	}
	return nil
}

// countRequest counts a request once it is answered.
func (h *Handler) countRequest(out *outcome) {
	if out.result != "" && !h.metricsOff && !h.series.isDropped() {
		requestsTotal.WithLabelValues(h.Name, out.result, out.class, h.mode()).Inc()
	}
}

// timeVerify observes the time since start as a verification's.
func (h *Handler) timeVerify(start time.Time) {
	if h.metricsOff || h.series.isDropped() {
		return
	}
	verifySeconds.WithLabelValues(h.Name).Observe(time.Since(start).Seconds())
}

// rejectClass is the reason class of a refusal with this status and error.
func rejectClass(status int, err error) string {
	var failed *verify.Error
	switch {
	case errors.As(err, &failed):
		return verifyClass(failed.Kind)
	case status == http.StatusRequestEntityTooLarge:
		return reasonBodyTooLarge
	case errors.Is(err, errReadingBody):
		return reasonMalformed
	case status == http.StatusBadRequest:
		return reasonBadEvent
	}
	return reasonOther
}

func verifyClass(kind verify.ErrorKind) string {
	switch kind {
	case verify.MissingSignature, verify.MalformedSignature, verify.SignatureMismatch, verify.UnsignedBody:
		return reasonSignature
	case verify.MissingTimestamp, verify.MalformedTimestamp, verify.StaleTimestamp, verify.FutureTimestamp:
		return reasonTimestamp
	case verify.MissingID:
		return reasonBadEvent
	}
	return reasonOther
}

// unavailableClass is the reason class of a ledger that refuses work.
func unavailableClass(err *ledgerpool.Unavailable) string {
	if err == ledgerpool.ErrDiskLow {
		return reasonDiskLow
	}
	return reasonLedgerDown
}

// deliveryObserver counts a route's deliveries (deliver.Observer).
type deliveryObserver struct {
	attempts prometheus.Observer
	results  map[dedupe.State]prometheus.Counter
}

func newDeliveryObserver(route string) *deliveryObserver {
	return &deliveryObserver{
		attempts: deliverySeconds.WithLabelValues(route),
		results: map[dedupe.State]prometheus.Counter{
			dedupe.Delivered:  deliveriesTotal.WithLabelValues(route, "delivered"),
			dedupe.Pending:    deliveriesTotal.WithLabelValues(route, "retry"),
			dedupe.Dead:       deliveriesTotal.WithLabelValues(route, "dead"),
			dedupe.Superseded: deliveriesTotal.WithLabelValues(route, "superseded"),
		},
	}
}

// Attempted implements deliver.Observer.
func (o *deliveryObserver) Attempted(took time.Duration) {
	o.attempts.Observe(took.Seconds())
}

// Recorded implements deliver.Observer.
func (o *deliveryObserver) Recorded(state dedupe.State) {
	if c, ok := o.results[state]; ok {
		c.Inc()
	}
}

// Interface guards
var _ deliver.Observer = (*deliveryObserver)(nil)

// The Badger ledgers' group commits (dedupe/badgerstore/commit.go), all stores together.
var (
	ledgerCommitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hookgate_ledger_commit_seconds",
		Help:    "Time taken to write and sync one group commit of a Badger ledger.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10), // 0.1 ms to 2 s
	})
	ledgerCommitRequests = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hookgate_ledger_commit_group_size",
		Help:    "Requests (accepts, dones, delivery updates, ...) sharing one group commit of a Badger ledger.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})
)

// observeCommit counts one group commit of a Badger ledger (badgerstore.CommitObserver).
func observeCommit(took time.Duration, requests int) {
	if !countingCommits() {
		return
	}
	ledgerCommitSeconds.Observe(took.Seconds())
	ledgerCommitRequests.Observe(float64(requests))
}
