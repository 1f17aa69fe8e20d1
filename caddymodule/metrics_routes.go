package caddymodule

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
)

// scrapeTimeout bounds the backlog reads of each route in a scrape (all routes are read at once):
// Badger's is a counter in memory, a Redis store's is a call to Redis.
const scrapeTimeout = 2 * time.Second

var (
	queueDepthDesc = prometheus.NewDesc("hookgate_queue_depth",
		"Events of an async route by state: pending (queued, not yet delivered or dead) and in_flight (being sent now, or sent and its outcome being recorded).",
		[]string{"route", "state"}, nil)
	upstreamPausedDesc = prometheus.NewDesc("hookgate_upstream_paused",
		"1 while an async route's upstream is paused after failures in a row (one event at a time probes it), else 0.",
		[]string{"route"}, nil)
	oldestPendingDesc = prometheus.NewDesc("hookgate_queue_oldest_pending_seconds",
		"Age of an async route's oldest undelivered event (pending, being attempted or not), since it was accepted; 0 when none is pending.",
		[]string{"route"}, nil)
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
	for _, d := range []*prometheus.Desc{queueDepthDesc, oldestPendingDesc, upstreamPausedDesc, diskFreeDesc, diskLowDesc, ledgerAvailableDesc} {
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

// collectRoute reports one route's disk, ledger, upstream and backlog.
func collectRoute(ch chan<- prometheus.Metric, name string, r appRoute) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if avail, low, ok := r.store.DiskFree(); ok {
		ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(avail), name)
		ch <- prometheus.MustNewConstMetric(diskLowDesc, prometheus.GaugeValue, boolGauge(low), name)
	}
	pending, err := r.store.Pending(ctx, name)
	ch <- prometheus.MustNewConstMetric(ledgerAvailableDesc, prometheus.GaugeValue, boolGauge(err == nil), name)
	if r.sender == nil {
		return
	}
	status := r.sender.Status()
	ch <- prometheus.MustNewConstMetric(upstreamPausedDesc, prometheus.GaugeValue, boolGauge(status.Paused), name)
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(status.InFlight), name, "in_flight")
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(pending), name, "pending")
	if age, err := oldestPendingAge(ctx, r.store, name, pending); err == nil {
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, age.Seconds(), name)
	}
}

// oldestPendingAge is how long ago the route's oldest pending event was accepted, or 0 with none
// pending. Both stores list pending events by accept time (Badger's state index, Redis's sorted
// listing), so it is the first of a listing without bodies: one index entry and one record
// read, not a scan and never a body.
func oldestPendingAge(ctx context.Context, store *ledgerpool.Ledger, route string, pending int) (time.Duration, error) {
	if pending == 0 {
		return 0, nil
	}
	oldest, err := store.ListDeliveries(ctx, route, dedupe.Pending, dedupe.Cursor{}, 1)
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

// Interface guards
var _ prometheus.Collector = (*routesCollector)(nil)
