package caddymodule

import (
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("hookgate", parseGlobalOption)
	caddy.RegisterModule(&App{})
}

// App is loaded by the hookgate handlers; its settings come from the `hookgate` global option. It
// knows every route of the running config and owns their deliverers' lifetime: Caddy starts apps
// only when a config runs, never for `caddy validate`, so no validation ever delivers an event.
type App struct {
	// BodyBudget bounds the request bodies all hookgate routes of the server hold in memory at
	// once, in bytes: each request reserves its Content-Length (max_body when unknown; on a sync
	// route, a body of up to 64 KiB reserves the power of two from 1 KiB it is read into) before its
	// body is read, with what verifying such a body allocates besides (verify's WorkingMemory:
	// twilio's form parameters, an Ed25519 key's copy of the signed message) until it is
	// verified, and past the budget new requests are answered 503 with Retry-After, unread.
	// Default: a quarter of the Go memory limit (GOMEMLIMIT, or what Caddy set from the
	// container's memory cap), at most 64 MiB.
	BodyBudget int64 `json:"body_budget,omitempty"`

	// MetricsOff leaves hookgate's series out of Caddy's metrics endpoint (admin /metrics and the
	// metrics handler) and stops counting and timing requests, deliveries and ledger commits. Default: false:
	// they are exposed whether or not Caddy's own HTTP request metrics are on (the `metrics`
	// global option), as reverse_proxy's upstream health is.
	MetricsOff bool `json:"metrics_off,omitempty"`

	mu         sync.Mutex
	routes     map[routeKey]*appRoute
	logger     *zap.Logger
	bodyBudget int64 // BodyBudget or its default
}

// routeKey identifies a route: its store's pool key (ledgerpool.Target.Key) and its name within it.
type routeKey struct{ store, name string }

type appRoute struct {
	store        *ledgerpool.Ledger
	minFree      uint64             // the store's disk watermark, as this route sets it
	destinations []*destination     // none in sync mode
	senders      []*pooledDeliverer // the destinations' deliverers, in their order, once started
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "hookgate",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets up the app.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.routes = map[routeKey]*appRoute{}
	if !a.MetricsOff {
		if err := registerMetrics(ctx, a); err != nil {
			return err
		}
	}
	return a.provisionBodyBudget()
}

// register records a route. Two routes may not share a name: in one store's scope their event
// IDs would silently collide, and in two stores the admin API, the CLI and /metrics, which
// know a route by its name, could not tell them apart. Routes sharing a store may not set
// different min_free for it either, since it has one watermark.
func (a *App) register(key routeKey, store *ledgerpool.Ledger, destinations []*destination, minFree uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for other, r := range a.routes {
		switch {
		case other.name == key.name && r.store.Scope() == store.Scope():
			return fmt.Errorf("two routes named %q share the store %s: give each its own `name`", key.name, store.Name())
		case other.name == key.name:
			return fmt.Errorf("two routes are named %q, one in the store %s and one in %s: the admin API, the CLI and the metrics know a route by its name, so give each its own `name`",
				key.name, r.store.Name(), store.Name())
		case r.store.Scope() != store.Scope():
			continue
		}
		if r.minFree != minFree {
			return fmt.Errorf("routes %q and %q share the store %s but set different min_free (%s and %s): set the same on both",
				other.name, key.name, store.Name(), humanize.IBytes(r.minFree), humanize.IBytes(minFree))
		}
	}
	a.routes[key] = &appRoute{store: store, destinations: destinations, minFree: minFree}
	return nil
}

// Start starts (or, across a reload, reconfigures) the deliverer of every async route. If one
// cannot start, those already started are let go again: Caddy stops only the apps that started.
func (a *App) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, r := range a.routes {
		r.store.SetMinFree(r.minFree) // this config's, across a reload
		for _, d := range r.destinations {
			sender, err := acquireDeliverer(a, deliveryKey{routeKey: key, destination: d.name}, r.store, d.cfg, d.forward.Order != nil, a.logger)
			if err != nil {
				a.releaseAll()
				return err
			}
			r.senders = append(r.senders, sender)
		}
	}
	startCounting(a)
	a.warnStrandedAll()
	return nil
}

// Stop lets go of the deliverers; the last config to let go of one stops it.
func (a *App) Stop() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	stopCounting(a)
	return a.releaseAll()
}

// releaseAll lets go of every deliverer this app holds.
func (a *App) releaseAll() error {
	var errs []error
	for _, r := range a.routes {
		for _, sender := range r.senders {
			if err := releaseDeliverer(a, sender); err != nil {
				errs = append(errs, err)
			}
		}
		r.senders = nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("hookgate: stopping deliverers: %v", errs)
	}
	return nil
}

// notify wakes a route's deliverer after an accept; before Start, its first poll finds the event.
func (a *App) notify(key routeKey) {
	a.mu.Lock()
	r := a.routes[key]
	a.mu.Unlock()
	if r == nil {
		return
	}
	for _, sender := range r.senders {
		sender.Notify()
	}
}

// warnStrandedAll has every store this app's routes use warn of its stranded queues
// (Ledger.WarnStranded).
func (a *App) warnStrandedAll() {
	byStore := map[*ledgerpool.Ledger]map[string]bool{}
	for _, r := range a.routes {
		if byStore[r.store] == nil {
			byStore[r.store] = map[string]bool{}
		}
		for _, d := range r.destinations {
			byStore[r.store][d.queue] = true
		}
	}
	for store, delivering := range byStore {
		go store.WarnStranded(a.logger, delivering)
	}
}

// parseGlobalOption reads the hookgate global option into the hookgate app's config:
//
//	{
//		hookgate {
//			body_budget <size>
//			metrics off
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	d.Next() // option name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "body_budget":
			var raw string
			if !d.AllArgs(&raw) {
				return nil, d.ArgErr()
			}
			size, err := humanize.ParseBytes(raw)
			if err != nil {
				return nil, d.Errf("body_budget: %v", err)
			}
			app.BodyBudget = int64(size)
		case "metrics":
			var value string
			if !d.AllArgs(&value) || value != "off" {
				return nil, d.Errf("metrics takes one argument: off")
			}
			app.MetricsOff = true
		default:
			return nil, d.Errf("unrecognized hookgate global option %q", d.Val())
		}
	}
	return httpcaddyfile.App{Name: "hookgate", Value: caddyconfig.JSON(app, nil)}, nil
}

// Interface guards
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
)
