package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// routeSeries counts the started configs that have a route of each name, so that the route's
// series leave /metrics when the last config that has it stops: a reload that drops a route drops
// its counters and histograms, and one that keeps it (the new config starts before the old one
// stops) keeps them counting. Its gauges need nothing: they are read from the running config.
var routeSeries = caddy.NewUsagePool()

// routeSeriesHold is a started config's hold on one route name's series.
type routeSeriesHold struct{ route string }

// holdRouteSeries keeps the series of a started config's routes.
func holdRouteSeries(names []string) {
	for _, name := range names {
		routeSeries.LoadOrStore(name, &routeSeriesHold{route: name})
	}
}

// releaseRouteSeries lets go of a stopping config's routes' series.
func releaseRouteSeries(names []string) {
	for _, name := range names {
		_, _ = routeSeries.Delete(name) // Destruct never fails
	}
}

// Destruct deletes the route's series once no running config has the route.
func (h *routeSeriesHold) Destruct() error {
	labels := prometheus.Labels{"route": h.route}
	requestsTotal.DeletePartialMatch(labels)
	verifySeconds.DeletePartialMatch(labels)
	deliveriesTotal.DeletePartialMatch(labels)
	deliverySeconds.DeletePartialMatch(labels)
	return nil
}

// Interface guard
var _ caddy.Destructor = (*routeSeriesHold)(nil)
