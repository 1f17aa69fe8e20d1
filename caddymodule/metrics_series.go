package caddymodule

import (
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
)

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

// Interface guard
var _ caddy.Destructor = (*routeSeriesHold)(nil)
