package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/jsonpath"
)

// An async route delivers each event it accepts to its destinations: a lone `forward URL`, whose
// destination is named default, or several `forward NAME URL`, each with its own queue,
// filters, retries, dead letters and rate. The event is stored once and queued for every
// destination that takes it in the write that acknowledges it (dedupe.Claim.Destinations).

// destination is one of an async route's destinations as it runs.
type destination struct {
	forward *Forward
	name    string // dedupe.DefaultDestination for a lone forward
	queue   string // its queue's namespace (dedupe.QueueNamespace)
	cfg     deliver.Config
	// full is set while accepts are refused at its max_pending, so that is logged once.
	full atomic.Bool
}

// checkCopies refuses copies where they cannot mean what they say.
func (h *Handler) checkCopies() error {
	for _, f := range h.Copies {
		switch {
		case h.async():
			return errors.New("copy is for sync routes, where the app behind answers the provider: on an async route, add a destination (forward NAME URL)")
		case h.Monitor:
			return errors.New("monitor and copy cannot be used together: monitor hands every request on unclassified, so nothing is known to be taken by the app; monitor first, then enforce and add copies")
		case f.Name == "":
			return errors.New("copy: each copy needs a name (copy NAME URL)")
		case f.MaxPending != 0:
			return fmt.Errorf("copy %s: max_pending does not apply to a copy: the app has taken the event, so its copy is queued whatever the backlog (watch hookgate_queue_depth)", f.Name)
		case f.Order != nil:
			return fmt.Errorf("copy %s: order does not apply to a copy: the app has taken the event, which cannot be refused for a missing key", f.Name)
		}
	}
	return nil
}

// async reports whether the route queues what it accepts.
func (h *Handler) async() bool { return h.Forward != nil || len(h.Forwards) > 0 }

// forwards is the route's destinations as configured: the lone forward, named default, and the
// named ones.
func (h *Handler) forwards() []*Forward {
	all := make([]*Forward, 0, 1+len(h.Forwards))
	if h.Forward != nil {
		all = append(all, h.Forward)
	}
	return append(all, h.Forwards...)
}

// provisionDestinations checks the route's destinations and builds each one's deliverer config.
// A destination of a route whose other destination filters nothing still takes what it
// filters: an event none takes is ignored.
func (h *Handler) provisionDestinations() error {
	if err := h.checkCopies(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, f := range slices.Concat(h.forwards(), h.Copies) {
		name := f.Name
		switch {
		case f == h.Forward && name != "" && name != dedupe.DefaultDestination:
			return fmt.Errorf("forward: the lone forward's destination is named %s; name it in forwards instead", dedupe.DefaultDestination)
		case name == "" && f != h.Forward:
			return errors.New("forward: each of several destinations needs a name (forward NAME URL)")
		case name == "":
			name = dedupe.DefaultDestination
		}
		if err := dedupe.CheckDestinationName(name); err != nil {
			return fmt.Errorf("forward: %w", err)
		}
		if seen[name] {
			return fmt.Errorf("forward: two destinations are named %s", name)
		}
		seen[name] = true
		for i := range f.Only {
			if err := f.Only[i].provision(); err != nil {
				return fmt.Errorf("forward %s: %w", name, err)
			}
		}
		switch {
		case f.Order != nil:
			if err := f.Order.provision(); err != nil {
				return fmt.Errorf("forward %s: order: %w", name, err)
			}
		case f.OnDead != "":
			return fmt.Errorf("forward %s: on_dead applies to ordered events only: add `order json|header …`", name)
		}
		cfg, err := f.deliverConfig()
		if err != nil {
			return err
		}
		if !h.metricsOff {
			cfg.Observer = newDeliveryObserver(h.Name, name)
		}
		if sign := h.upstream.forDestination(f.Resign); sign != nil {
			cfg.Sign = sign.signAttempt
		}
		h.destinations = append(h.destinations, &destination{
			forward: f, name: name, queue: dedupe.QueueNamespace(h.Name, name), cfg: cfg,
		})
	}
	return nil
}

// takers puts into claim the destinations that take the event, and reports whether any does.
// A route with one destination and no destination filters leaves the claim as it is, so the
// common case costs nothing: its default destination, bounded by its max_pending.
func (h *Handler) takers(claim *dedupe.Claim, r *http.Request, doc *jsonpath.Body) (bool, error) {
	if len(h.destinations) == 1 && len(h.destinations[0].forward.Only) == 0 && h.destinations[0].name == dedupe.DefaultDestination &&
		h.destinations[0].forward.Order == nil && h.async() {
		claim.MaxPending = h.destinations[0].cfg.MaxPending
		return true, nil
	}
	for _, d := range h.destinations {
		f, err := firstMismatch(d.forward.Only, r, doc)
		if err != nil {
			return false, err
		}
		if f != nil {
			continue
		}
		key, err := d.orderKey(r, doc)
		if err != nil {
			return false, err
		}
		claim.Destinations = append(claim.Destinations, dedupe.Destination{Name: d.name, MaxPending: d.cfg.MaxPending, OrderKey: key})
	}
	return len(claim.Destinations) > 0, nil
}

// orderKey is the event's key in the destination's order, "" when it is unordered. Read only for
// a destination that takes the event, so that filters can send keyless events elsewhere.
func (d *destination) orderKey(r *http.Request, doc *jsonpath.Body) (string, error) {
	if d.forward.Order == nil {
		return "", nil
	}
	key, err := d.forward.Order.lookup(r, doc)
	switch {
	case err != nil:
		return "", fmt.Errorf("destination %s: order key: %w", d.name, err)
	case len(key) > dedupe.MaxOrderKey:
		return "", fmt.Errorf("destination %s: order key of %d bytes, at most %d", d.name, len(key), dedupe.MaxOrderKey)
	}
	return key, nil
}

// fullDestination is the destination of the claim whose backlog is at its max_pending, as the
// ledger reads now; nil when none is any more (it drained since).
func (h *Handler) fullDestination(ctx context.Context, claim dedupe.Claim) *destination {
	for _, d := range h.destinations {
		if !claimTakes(claim, d.name) || d.cfg.MaxPending <= 0 {
			continue
		}
		if backlog, err := h.ledger.Pending(ctx, d.queue); err == nil && backlog >= d.cfg.MaxPending {
			return d
		}
	}
	return nil
}

// claimTakes reports whether the claim queues its event for the destination named name.
func claimTakes(claim dedupe.Claim, name string) bool {
	if len(claim.Destinations) == 0 {
		return name == dedupe.DefaultDestination
	}
	for _, d := range claim.Destinations {
		if d.Name == name {
			return true
		}
	}
	return false
}

// noteFull logs once when a destination's backlog reaches max_pending and once when it has
// drained (noteDrained), not once per refused request.
func (h *Handler) noteFull(d *destination, full bool) {
	if d.full.Swap(full) == full {
		return
	}
	fields := []zap.Field{zap.String("route", h.Name), zap.String("destination", d.name), zap.Int("max_pending", d.cfg.MaxPending)}
	if full {
		h.logger.Warn("backlog at max_pending: refusing new events (503) until deliveries catch up", fields...)
		return
	}
	h.logger.Info("backlog below max_pending: accepting events again", fields...)
}

// noteDrained ends a destination's full state once its backlog is a tenth below max_pending. At
// the bound each delivery lets one accept in before the next is refused again: ending the state
// on the first accept would log a WARN and an INFO per delivery.
func (h *Handler) noteDrained(ctx context.Context) {
	for _, d := range h.destinations {
		if !d.full.Load() {
			continue
		}
		backlog, err := h.ledger.Pending(ctx, d.queue)
		if err != nil || backlog > d.cfg.MaxPending-max(1, d.cfg.MaxPending/10) {
			continue
		}
		h.noteFull(d, false)
	}
}
