package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
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
		Help: "Events' recorded delivery outcomes, by route, destination and result (delivered, retry, dead, superseded).",
	}, []string{"route", "destination", "result"})
	deliverySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hookgate_delivery_seconds",
		Help:    "Time taken by one delivery attempt to the upstream, by route and destination.",
		Buckets: append(prometheus.DefBuckets, 30),
	}, []string{"route", "destination"})
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

// newDeliveryObserver counts the deliveries of a route's destination (default for a lone forward).
func newDeliveryObserver(route, destination string) *deliveryObserver {
	return &deliveryObserver{
		attempts: deliverySeconds.WithLabelValues(route, destination),
		results: map[dedupe.State]prometheus.Counter{
			dedupe.Delivered:  deliveriesTotal.WithLabelValues(route, destination, "delivered"),
			dedupe.Pending:    deliveriesTotal.WithLabelValues(route, destination, "retry"),
			dedupe.Dead:       deliveriesTotal.WithLabelValues(route, destination, "dead"),
			dedupe.Superseded: deliveriesTotal.WithLabelValues(route, destination, "superseded"),
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

// The Badger ledgers' group commits (dedupe/badgerstore/commit.go), all stores together.
var (
	ledgerCommitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "hookgate_ledger_commit_seconds",
		Help: "Time taken to write and sync one group commit of a Badger ledger.",
		// Doubling from 0.1 ms to 1.6 s: a commit is one or two syncs of a few hundred µs, and
		// its p99 against the disk's is what the bench and an operator compare.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15),
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

// routeSeries counts the configs' handlers of each route name, so that the route's series leave
// /metrics when the last config that has it is cleaned up: a reload that drops a route drops its
// counters and histograms, and one that keeps it (the new config is provisioned before the old
// one is cleaned up) keeps them counting. Its gauges need nothing: they are read from the
// running config.
var routeSeries = caddy.NewUsagePool()

// routeSeriesHold is the handlers' hold on one route name's series.
type routeSeriesHold struct {
	route string
	// dropped is set once the series are deleted: the dropped config's requests still being
	// answered (Caddy does not wait for them on a reload) then count nothing, rather than bring
	// the series back for good.
	dropped atomic.Bool
}

// holdRouteSeries keeps the series of a provisioned handler's route.
func holdRouteSeries(name string) *routeSeriesHold {
	hold, _ := routeSeries.LoadOrStore(name, &routeSeriesHold{route: name})
	return hold.(*routeSeriesHold)
}

// releaseRouteSeries lets go of a cleaned-up handler's hold.
func releaseRouteSeries(name string) {
	_, _ = routeSeries.Delete(name) // Destruct never fails
}

// isDropped reports whether the route's series were deleted (a handler not provisioned has none).
func (h *routeSeriesHold) isDropped() bool {
	return h != nil && h.dropped.Load()
}

// Destruct deletes the route's series once no config has the route.
func (h *routeSeriesHold) Destruct() error {
	h.dropped.Store(true)
	labels := prometheus.Labels{"route": h.route}
	requestsTotal.DeletePartialMatch(labels)
	verifySeconds.DeletePartialMatch(labels)
	deliveriesTotal.DeletePartialMatch(labels)
	deliverySeconds.DeletePartialMatch(labels)
	return nil
}

// forgetDestinationSeries deletes the delivery series of a destination whose deliverer stopped
// for good (no running config has it), unless another store's route of the same name delivers
// to a destination of the same name: a reload that moves a route to another store keeps its
// series.
func forgetDestinationSeries(key deliveryKey) {
	elsewhere := false
	deliverers.Range(func(k, _ any) bool {
		other := k.(deliveryKey)
		elsewhere = other != key && other.name == key.name && other.destination == key.destination
		return !elsewhere
	})
	if elsewhere {
		return
	}
	labels := prometheus.Labels{"route": key.name, "destination": key.destination}
	deliveriesTotal.DeletePartialMatch(labels)
	deliverySeconds.DeletePartialMatch(labels)
}

// Interface guard
var _ caddy.Destructor = (*routeSeriesHold)(nil)

// scrapeTimeout bounds the backlog reads of each route in a scrape (all routes are read at once):
// Badger's is a counter in memory, a Redis store's is a call to Redis.
const scrapeTimeout = 2 * time.Second

var (
	queueDepthDesc = prometheus.NewDesc("hookgate_queue_depth",
		"Events of an async route's destination by state: pending (queued, not yet delivered or dead) and in_flight (being sent now, or sent and its outcome being recorded).",
		[]string{"route", "destination", "state"}, nil)
	upstreamPausedDesc = prometheus.NewDesc("hookgate_upstream_paused",
		"1 while an async route's destination's upstream is paused after failures in a row (one event at a time probes it), else 0.",
		[]string{"route", "destination"}, nil)
	oldestPendingDesc = prometheus.NewDesc("hookgate_queue_oldest_pending_seconds",
		"Age of the oldest event an async route's destination has not delivered (pending, being attempted or not), since it was accepted; 0 when none is pending.",
		[]string{"route", "destination"}, nil)
	keysHeldDesc = prometheus.NewDesc("hookgate_order_keys_held",
		"Keys of an ordered destination held by a dead letter: their later events wait until it is replayed or skipped.",
		[]string{"route", "destination"}, nil)
	diskFreeDesc = prometheus.NewDesc("hookgate_ledger_disk_free_bytes",
		"Free space of the filesystem of a route's Badger ledger, as last read (at most a few seconds old).",
		[]string{"route"}, nil)
	diskLowDesc = prometheus.NewDesc("hookgate_ledger_disk_low",
		"1 while a route's Badger ledger is below its min_free watermark and new events are refused, else 0.",
		[]string{"route"}, nil)
	ledgerAvailableDesc = prometheus.NewDesc("hookgate_ledger_available",
		"1 while a route's ledger answers (the scrape reads its backlog), 0 while it cannot: Redis unreachable, or a Badger ledger not open.",
		[]string{"route"}, nil)
)

// routesCollector reports the running config's routes as they are at scrape time, from what is
// kept in memory: each backlog's counter, each deliverer's status, each disk's watermark.
type routesCollector struct{ app *App }

// Describe implements prometheus.Collector.
func (c *routesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queueDepthDesc, oldestPendingDesc, upstreamPausedDesc, keysHeldDesc, diskFreeDesc, diskLowDesc, ledgerAvailableDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A route whose backlog cannot be read (its store is
// down) is left out of hookgate_queue_depth and hookgate_queue_oldest_pending_seconds rather
// than reported as empty, and is reported in hookgate_ledger_available: each scrape reads every
// route's backlog, a sync route's too, so an outage shows without any request to meet it.
// Routes are read at once, each within its own scrapeTimeout, so a hung store neither delays
// the scrape past one timeout nor leaves the others no time and reported unavailable.
func (c *routesCollector) Collect(ch chan<- prometheus.Metric) {
	var wg sync.WaitGroup
	for key, r := range c.app.routesNow() { // names are unique in a config (App.register)
		wg.Go(func() { collectRoute(ch, key.name, r) })
	}
	wg.Wait()
}

// collectRoute reports one route's disk and ledger, and each of its destinations' upstream and
// backlog.
func collectRoute(ch chan<- prometheus.Metric, name string, r appRoute) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if avail, low, ok := r.store.DiskFree(); ok {
		ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(avail), name)
		ch <- prometheus.MustNewConstMetric(diskLowDesc, prometheus.GaugeValue, boolGauge(low), name)
	}
	_, err := r.store.Pending(ctx, name)
	ch <- prometheus.MustNewConstMetric(ledgerAvailableDesc, prometheus.GaugeValue, boolGauge(err == nil), name)
	for _, sender := range r.senders {
		collectDestination(ctx, ch, r.store, sender)
	}
}

// collectDestination reports a destination's upstream and backlog.
func collectDestination(ctx context.Context, ch chan<- prometheus.Metric, store *ledgerpool.Ledger, sender *pooledDeliverer) {
	route, dest, queue := sender.key.name, sender.key.destination, sender.key.queue()
	status := sender.Status()
	ch <- prometheus.MustNewConstMetric(upstreamPausedDesc, prometheus.GaugeValue, boolGauge(status.Paused), route, dest)
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(status.InFlight), route, dest, "in_flight")
	pending, err := store.Pending(ctx, queue)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(pending), route, dest, "pending")
	if age, err := oldestPendingAge(ctx, store, queue, pending); err == nil {
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, age.Seconds(), route, dest)
	}
	// An unordered destination may still have keys held from before a reload removed its order.
	if held, err := store.CountHeld(ctx, queue); err == nil && (held > 0 || sender.isOrdered()) {
		ch <- prometheus.MustNewConstMetric(keysHeldDesc, prometheus.GaugeValue, float64(held), route, dest)
	}
}

// oldestPendingAge is how long ago the route's oldest pending event was accepted, or 0 with none
// pending. Both stores list pending events by accept time (Badger's state index, Redis's sorted
// listing), so it is the first of a listing without bodies: one index entry and one record
// read, not a scan and never a body.
func oldestPendingAge(ctx context.Context, store *ledgerpool.Ledger, queue string, pending int) (time.Duration, error) {
	if pending == 0 {
		return 0, nil
	}
	oldest, err := store.ListDeliveries(ctx, queue, dedupe.Pending, dedupe.Cursor{}, 1)
	if err != nil || len(oldest) == 0 { // none: delivered since the count was read
		return 0, err
	}
	return max(time.Since(oldest[0].AcceptedAt), 0), nil
}

// routesNow is a copy of the app's routes, so a scrape reads stores without holding the app.
func (a *App) routesNow() map[routeKey]appRoute {
	a.mu.Lock()
	defer a.mu.Unlock()
	routes := make(map[routeKey]appRoute, len(a.routes))
	for key, r := range a.routes {
		routes[key] = *r
	}
	return routes
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// commitsCounted tells whether the config in force counts: the Badger ledgers' commit observers
// (observeCommit) are set once, when a store opens, and a pooled store outlives the config
// that opened it, so they ask here rather than remember the `metrics off` of that config.
var commitsCounted = struct {
	sync.Mutex
	started []*App // the started configs' apps, in the order they started; the last is in force
	on      bool
}{on: true}

// startCounting puts a starting app's `metrics off` in force.
func startCounting(a *App) {
	commitsCounted.Lock()
	defer commitsCounted.Unlock()
	commitsCounted.started = append(commitsCounted.started, a)
	commitsCounted.on = !a.MetricsOff
}

// stopCounting lets go of a stopping app; if its setting was in force (a config that failed to
// start), the previous config's comes back.
func stopCounting(a *App) {
	commitsCounted.Lock()
	defer commitsCounted.Unlock()
	commitsCounted.started = slices.DeleteFunc(commitsCounted.started, func(o *App) bool { return o == a })
	if n := len(commitsCounted.started); n > 0 {
		commitsCounted.on = !commitsCounted.started[n-1].MetricsOff
	}
}

// countingCommits reports whether the config in force counts commits.
func countingCommits() bool {
	commitsCounted.Lock()
	defer commitsCounted.Unlock()
	return commitsCounted.on
}

// Interface guards
var (
	_ deliver.Observer     = (*deliveryObserver)(nil)
	_ prometheus.Collector = (*routesCollector)(nil)
)
