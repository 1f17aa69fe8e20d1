package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
)

// deliverers holds one running deliverer per destination of a route across config reloads, so a reload
// reconfigures it in place instead of stopping one and starting another: nothing queued is
// dropped, sent twice or stalled.
var deliverers = caddy.NewUsagePool()

// stopTimeout bounds how long shutdown waits for attempts in flight; unfinished ones are
// delivered again after their lease.
const stopTimeout = 10 * time.Second

// deliveryKey identifies a destination of a route: its deliverer's key in deliverers.
type deliveryKey struct {
	routeKey
	destination string
}

// queue is the namespace of the destination's queue.
func (k deliveryKey) queue() string { return dedupe.QueueNamespace(k.name, k.destination) }

type pooledDeliverer struct {
	*deliver.Deliverer
	key deliveryKey
	// store is the route's ledger, which the deliverer's outbox is; the admin API reads it
	// through queue.
	store queueLedger
	// replaying is held while a replay reads the backlog and replays one event (replayIfRoom).
	replaying sync.Mutex

	mu sync.Mutex
	// owners are the started configs' apps holding the deliverer, in the order they started,
	// each with its settings; the last one's are in force.
	owners []owner
}

// queueLedger is what the admin API reads and replays of a route's queue.
type queueLedger interface {
	Get(ctx context.Context, ns, id string) (*dedupe.Event, error)
	List(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error)
	ListDeliveries(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error)
	Pending(ctx context.Context, ns string) (int, error)
	Replay(ctx context.Context, ns, id string, now time.Time) error
	dedupe.Orderer
}

// queue is the route's ledger, read under mu: the admin API's tests put a store that fails or
// counts its reads in its place.
func (p *pooledDeliverer) queue() queueLedger {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.store
}

type owner struct {
	app *App
	cfg deliver.Config
	// ordered is set when the destination orders its events by a key (Forward.Order).
	ordered bool
}

// acquireDeliverer starts the destination's deliverer, or reconfigures the running one, for app.
func acquireDeliverer(app *App, key deliveryKey, store *ledgerpool.Ledger, cfg deliver.Config, ordered bool, logger *zap.Logger) (*pooledDeliverer, error) {
	val, loaded, err := deliverers.LoadOrNew(key, func() (caddy.Destructor, error) {
		logger := logger.With(zap.String("route", key.name))
		if key.destination != dedupe.DefaultDestination {
			logger = logger.With(zap.String("destination", key.destination))
		}
		d := deliver.New(store.Outbox(), key.queue(), cfg, logger)
		d.Start()
		return &pooledDeliverer{Deliverer: d, key: key, store: store}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("hookgate: deliverer %s %s: %w", key.name, key.destination, err)
	}
	p := val.(*pooledDeliverer)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.owners = append(p.owners, owner{app: app, cfg: cfg, ordered: ordered})
	if loaded {
		p.Configure(cfg)
	}
	return p, nil
}

// releaseDeliverer lets go of app's hold on the route's deliverer. If app's settings were in
// force, the previous owner's come back: that is a config that failed to start (Caddy stops
// the apps it had started and keeps the old config running), since a config that replaces
// a running one is released only after its successor started.
func releaseDeliverer(app *App, p *pooledDeliverer) error {
	p.mu.Lock()
	i := slices.IndexFunc(p.owners, func(o owner) bool { return o.app == app })
	if i >= 0 {
		wasInForce := i == len(p.owners)-1
		p.owners = slices.Delete(p.owners, i, i+1)
		if wasInForce && len(p.owners) > 0 {
			p.Configure(p.owners[len(p.owners)-1].cfg)
		}
	}
	p.mu.Unlock()
	_, err := deliverers.Delete(p.key)
	return err
}

// config is the route's settings in force: the last started owner's.
func (p *pooledDeliverer) config() deliver.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.owners) == 0 {
		return deliver.Config{}.WithDefaults()
	}
	return p.owners[len(p.owners)-1].cfg
}

// isOrdered reports whether the destination's settings in force order its events by a key.
func (p *pooledDeliverer) isOrdered() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.owners) > 0 && p.owners[len(p.owners)-1].ordered
}

// Destruct stops the deliverer once no running config uses it, and drops its series.
func (p *pooledDeliverer) Destruct() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	err := p.Stop(ctx)
	forgetDestinationSeries(p.key)
	return err
}

// findDeliverer returns the running deliverer of the route with this name and its destination
// named dest, for the admin API. dest may be "" when the route has one destination.
func findDeliverer(name, dest string) (*pooledDeliverer, error) {
	var found []*pooledDeliverer
	stores := map[string]bool{}
	deliverers.Range(func(k, v any) bool {
		if key := k.(deliveryKey); key.name == name {
			stores[key.store] = true
			if dest == "" || key.destination == dest {
				found = append(found, v.(*pooledDeliverer))
			}
		}
		return true
	})
	switch {
	case len(stores) == 0:
		return nil, fmt.Errorf("no async route named %q is running", name)
	case len(stores) > 1:
		return nil, fmt.Errorf("several stores have a route named %q", name)
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0:
		return nil, fmt.Errorf("route %q has no destination named %q", name, dest)
	}
	names := make([]string, len(found))
	for i, p := range found {
		names[i] = p.key.destination
	}
	slices.Sort(names)
	return nil, fmt.Errorf("%w: route %q has %s; name one with ?dest=", errSeveralDestinations, name, strings.Join(names, ", "))
}

// errSeveralDestinations is findDeliverer's error for a route whose destination must be named.
var errSeveralDestinations = errors.New("several destinations")

// Interface guard
var _ caddy.Destructor = (*pooledDeliverer)(nil)

// rateView is a route's delivery rate, for operators.
type rateView struct {
	// Rate is the route's rate limit ("20/s"); absent when it has none.
	Rate string `json:"rate,omitempty"`
	// DrainTime is how long the backlog takes to start at that rate, to the second ("4m0s");
	// absent without a rate.
	DrainTime string `json:"drain_time,omitempty"`
}

// rateOf is what operators see of rate with backlog queued.
func rateOf(rate deliver.Rate, backlog int) rateView {
	if rate == (deliver.Rate{}) {
		return rateView{}
	}
	return rateView{Rate: rate.String(), DrainTime: rate.Drain(backlog).Round(time.Second).String()}
}
