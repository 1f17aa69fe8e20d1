package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
)

func init() {
	caddy.RegisterModule(&AdminAPI{})
}

// AdminAPI lets operators see and replay queued events of async routes, on Caddy's admin
// endpoint:
//
//	GET  /hookgate/events/<route>?state=pending|delivered|dead|superseded&limit=N[&fields=delivery]
//	                                       fields=delivery: each event's ID and delivery only,
//	                                       read without its body (what the page lists)
//	GET  /hookgate/events/<route>/<id>
//	POST /hookgate/replay/<route>/<id>     replay one dead letter
//	POST /hookgate/replay/<route>          replay every dead letter of the route
//	GET  /hookgate/status/<route>          backlog and max_pending, paused?, consecutive failures,
//	                                       attempts in flight
//	GET  /hookgate/routes                  every running async route's status and backlog
//	GET  /hookgate/ui                      the dead-letter page (ui.go)
//
// It looks routes up in the running deliverers at request time, so it follows config reloads.
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (*AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.hookgate",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Routes returns the admin routes.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/hookgate/", Handler: caddy.AdminHandlerFunc(a.serveOrRefuse)}}
}

// serveOrRefuse serves the request; a 503 (the ledger out of reach for now) says when to retry,
// as the routes' own 503s do.
func (a *AdminAPI) serveOrRefuse(w http.ResponseWriter, r *http.Request) error {
	// A browser marks what another site's page made it send, such as a hidden frame's GET, which
	// carries no Origin for the admin API to check: hookgate answers only its own page and
	// addresses typed into the browser (or tools, which send no such header).
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
	default:
		return apiError(http.StatusForbidden, errors.New("hookgate: refusing a request made by another site's page"))
	}
	err := a.serve(w, r)
	var apiErr caddy.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatus == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	return err
}

const (
	// defaultListLimit bounds a listing unless ?limit= says otherwise.
	defaultListLimit = 100
	// maxListLimit is the most events one listing returns, so a listing's memory stays small.
	maxListLimit = 1000
	// replayPage is how many dead letters "replay all" reads at a time.
	replayPage = 500
)

func (a *AdminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	parts, err := pathParts(r.URL.EscapedPath())
	switch {
	case err == nil && len(parts) == 1 && parts[0] == "ui":
		return a.serveUI(w, r)
	case err == nil && len(parts) == 1 && parts[0] == "routes":
		return a.routes(w, r)
	case err != nil || len(parts) < 2 || len(parts) > 3:
		return apiError(http.StatusNotFound, errors.New("use /hookgate/ui, /hookgate/routes, /hookgate/events/<route>[/<id>], /hookgate/replay/<route>[/<id>] or /hookgate/status/<route>, with / in a route or ID escaped as %2F"))
	}
	sender, err := findDeliverer(parts[1])
	if err != nil {
		return apiError(http.StatusNotFound, err)
	}
	verb, id := parts[0]+" "+r.Method, ""
	if len(parts) == 3 {
		id = parts[2]
	}
	switch {
	case verb == "events GET" && id == "":
		return a.list(w, r, sender)
	case verb == "events GET":
		ev, err := sender.store.Get(r.Context(), sender.key.name, id)
		if err != nil {
			return storeError(err)
		}
		return writeJSON(w, viewOf(ev))
	case verb == "replay POST":
		return a.replay(w, r, sender, id)
	case verb == "status GET" && id == "":
		return a.status(w, r, sender)
	}
	return apiError(http.StatusMethodNotAllowed, fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path))
}

func (a *AdminAPI) list(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer) error {
	state := dedupe.State(r.URL.Query().Get("state"))
	switch state {
	case "":
		state = dedupe.Pending
	case dedupe.Pending, dedupe.Delivered, dedupe.Dead, dedupe.Superseded:
	default:
		return apiError(http.StatusBadRequest, fmt.Errorf("state must be pending, delivered, dead or superseded"))
	}
	limit := defaultListLimit
	if raw := r.URL.Query().Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxListLimit {
			return apiError(http.StatusBadRequest, fmt.Errorf("limit must be a number from 1 to %d", maxListLimit))
		}
		limit = n
	}
	switch fields := r.URL.Query().Get("fields"); fields {
	case "":
	case "delivery":
		// A Badger ledger reads an event's body with its request line; the page, which
		// lists a route's dead letters every few seconds, shows neither.
		events, err := sender.store.ListDeliveries(r.Context(), sender.key.name, state, dedupe.Cursor{}, limit)
		if err != nil {
			return storeError(err)
		}
		views := make([]deliveryView, 0, len(events))
		for _, ev := range events {
			views = append(views, deliveryOf(ev))
		}
		return writeJSON(w, map[string]any{"route": sender.key.name, "state": state, "events": views})
	default:
		return apiError(http.StatusBadRequest, fmt.Errorf("fields must be delivery, or left out for the whole listing"))
	}
	events, err := sender.store.List(r.Context(), sender.key.name, state, dedupe.Cursor{}, limit)
	if err != nil {
		return storeError(err)
	}
	views := make([]eventView, 0, len(events))
	for _, ev := range events {
		views = append(views, viewOf(ev))
	}
	return writeJSON(w, map[string]any{"route": sender.key.name, "state": state, "events": views})
}

// routeStatus is an async route's state for operators.
type routeStatus struct {
	deliver.Status
	// Backlog is the number of the route's undelivered events, waiting or being attempted.
	Backlog int `json:"backlog"`
	// MaxPending is the backlog at which new events are refused with 503.
	MaxPending int `json:"max_pending"`
}

func (a *AdminAPI) status(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer) error {
	backlog, err := sender.store.Pending(r.Context(), sender.key.name)
	if err != nil {
		return apiError(http.StatusServiceUnavailable, fmt.Errorf("reading the backlog: %w", err))
	}
	return writeJSON(w, routeStatus{Status: sender.Status(), Backlog: backlog, MaxPending: sender.config().MaxPending})
}

// replay makes one dead letter, or all of the route's, pending again.
func (a *AdminAPI) replay(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer, id string) error {
	if id != "" {
		if err := sender.store.Replay(r.Context(), sender.key.name, id, time.Now()); err != nil {
			return storeError(err)
		}
		sender.Notify()
		return writeJSON(w, map[string]any{"route": sender.key.name, "replayed": 1})
	}
	replayed, err := replayAll(r.Context(), sender)
	if replayed > 0 {
		sender.Notify()
	}
	if err != nil {
		return storeError(fmt.Errorf("replayed %d, then: %w", replayed, err))
	}
	return writeJSON(w, map[string]any{"route": sender.key.name, "replayed": replayed})
}

// replayAll replays the route's dead letters a page at a time, so its memory does not grow with
// their number (it lists their deliveries, not their bodies, which Replay rewrites anyway). It
// walks them in accept order and stops at those accepted after it began: a replayed event that
// dies again keeps its accept time, behind the walk, so it is not replayed twice, and the walk
// ends however fast new dead letters come.
func replayAll(ctx context.Context, sender *pooledDeliverer) (int, error) {
	began := time.Now()
	var after dedupe.Cursor
	replayed := 0
	for {
		dead, err := sender.store.ListDeliveries(ctx, sender.key.name, dedupe.Dead, after, replayPage)
		if err != nil {
			return replayed, err
		}
		for _, ev := range dead {
			if ev.AcceptedAt.After(began) {
				return replayed, nil
			}
			after = ev.After()
			err := sender.store.Replay(ctx, sender.key.name, ev.ID, time.Now())
			switch {
			case errors.Is(err, dedupe.ErrNotDead) || errors.Is(err, dedupe.ErrNotFound):
				continue // replayed on its own meanwhile, or expired: nothing left to replay
			case err != nil:
				return replayed, fmt.Errorf("%s: %w", ev.ID, err)
			}
			replayed++
		}
		if len(dead) < replayPage {
			return replayed, nil
		}
	}
}

// pathParts splits the escaped path after /hookgate/ into its unescaped segments, so an ID
// or route containing "/" can be addressed as %2F.
func pathParts(escaped string) ([]string, error) {
	parts := strings.Split(strings.Trim(strings.TrimPrefix(escaped, "/hookgate/"), "/"), "/")
	for i, p := range parts {
		var err error
		if parts[i], err = url.PathUnescape(p); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// eventView is what operators see of an event: its request line and delivery, not its body or
// headers.
type eventView struct {
	deliveryView
	Entity    string `json:"entity,omitempty"`
	Version   int64  `json:"version,omitempty"`
	Method    string `json:"method"`
	URI       string `json:"uri"`
	BodyBytes int    `json:"body_bytes"`
}

// deliveryView is an event's delivery: what the dead-letter page lists.
type deliveryView struct {
	ID          string       `json:"id"`
	State       dedupe.State `json:"state"`
	Attempts    int          `json:"attempts"`
	NextAttempt *time.Time   `json:"next_attempt,omitempty"`
	LastStatus  int          `json:"last_status,omitempty"`
	LastError   string       `json:"last_error,omitempty"`
	AcceptedAt  time.Time    `json:"accepted_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
}

func viewOf(ev *dedupe.Event) eventView {
	return eventView{
		deliveryView: deliveryOf(ev),
		Entity:       ev.Entity, Version: ev.Version, Method: ev.Method, URI: ev.URI, BodyBytes: ev.BodyBytes,
	}
}

func deliveryOf(ev *dedupe.Event) deliveryView {
	v := deliveryView{
		ID: ev.ID, State: ev.State, Attempts: ev.Attempts, LastStatus: ev.LastStatus, LastError: ev.LastError,
		AcceptedAt: ev.AcceptedAt, UpdatedAt: ev.UpdatedAt,
	}
	if ev.State == dedupe.Pending {
		v.NextAttempt = &ev.NextAttempt
	}
	return v
}

// storeError answers for the ledger: an event it does not hold is 404, one not in the state the
// request needs is 409, a ledger out of reach for now (Redis down, a full disk) 503, and anything
// else (an I/O error, a ledger that is not open) is the server's fault, 500.
func storeError(err error) error {
	var unavailable *unavailableError
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		return apiError(http.StatusNotFound, err)
	case errors.As(err, &unavailable):
		return apiError(http.StatusServiceUnavailable, err)
	case errors.Is(err, dedupe.ErrNotDead):
		return apiError(http.StatusConflict, err)
	case errors.Is(err, dedupe.ErrNoRoom):
		return apiError(http.StatusServiceUnavailable, err)
	}
	return apiError(http.StatusInternalServerError, err)
}

func apiError(status int, err error) error {
	return caddy.APIError{HTTPStatus: status, Err: err, Message: err.Error()}
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// Interface guard
var _ caddy.AdminRouter = (*AdminAPI)(nil)
