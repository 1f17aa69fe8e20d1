package caddymodule

import (
	"context"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/deliver"
)

// deliverers holds one running deliverer per route across config reloads, so a reload
// reconfigures it in place instead of stopping one and starting another: nothing queued is
// dropped, sent twice or stalled.
var deliverers = caddy.NewUsagePool()

// stopTimeout bounds how long shutdown waits for attempts in flight; unfinished ones are
// delivered again after their lease.
const stopTimeout = 10 * time.Second

type pooledDeliverer struct {
	*deliver.Deliverer
	key   routeKey
	store *pooledLedger
}

func acquireDeliverer(key routeKey, store *pooledLedger, cfg deliver.Config, logger *zap.Logger) (*pooledDeliverer, error) {
	val, loaded, err := deliverers.LoadOrNew(key, func() (caddy.Destructor, error) {
		d := deliver.New(store, key.name, cfg, logger.With(zap.String("route", key.name)))
		d.Start()
		return &pooledDeliverer{Deliverer: d, key: key, store: store}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("hookgate: deliverer %s: %w", key.name, err)
	}
	p := val.(*pooledDeliverer)
	if loaded {
		p.Configure(cfg)
	}
	return p, nil
}

func releaseDeliverer(key routeKey) error {
	_, err := deliverers.Delete(key)
	return err
}

// Destruct stops the deliverer once no running config uses it.
func (p *pooledDeliverer) Destruct() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	return p.Stop(ctx)
}

// findDeliverer returns the running deliverer of the route with this name, for the admin API.
func findDeliverer(name string) (*pooledDeliverer, error) {
	var found []*pooledDeliverer
	deliverers.Range(func(k, v any) bool {
		if k.(routeKey).name == name {
			found = append(found, v.(*pooledDeliverer))
		}
		return true
	})
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no async route named %q is running", name)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("several stores have a route named %q", name)
}

// Interface guard
var _ caddy.Destructor = (*pooledDeliverer)(nil)
