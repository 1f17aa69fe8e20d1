package caddymodule

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
)

func init() {
	caddy.RegisterModule(&AdminAPI{})
}

// AdminAPI lets operators see and replay queued events of async routes, on Caddy's admin
// endpoint:
//
//	GET  /hookgate/events/<route>?state=pending|delivered|dead|superseded&limit=N[&after=C][&fields=delivery]
//	                                       up to N events, oldest accepted first, after cursor C;
//	                                       "next" is the cursor of the page after, when there is one.
//	                                       fields=delivery: each event's ID and delivery only,
//	                                       read without its body (what the page lists)
//	GET  /hookgate/events/<route>?id=<id>  one event
//	POST /hookgate/replay/<route>?id=<id>  replay one dead letter; 503 while the backlog is at
//	                                       max_pending
//	POST /hookgate/replay/<route>?all=1[&after=C]
//	                                       replay dead letters (after cursor C) while the backlog is
//	                                       below half of max_pending: {"replayed": N, "left": M,
//	                                       "next": where it stopped, while M > 0}
//	POST /hookgate/skip/<route>?id=<id>    let the events behind a dead letter holding its key
//	                                       (order, on_dead hold) go on; it stays dead
//	GET  /hookgate/status/<route>          backlog and max_pending, paused?, consecutive failures,
//	                                       attempts in flight, the rate limit and the time the
//	                                       backlog needs at that rate; for a sync route in monitor
//	                                       mode, its requests by would-be outcome (monitor.go)
//	GET  /hookgate/routes                  every running async route's status and backlog
//	GET  /hookgate/ui                      the dead-letter page (ui.go)
//
// An event ID goes in the query, where nothing rewrites it: in a path, Go's mux redirects a "."
// or ".." segment and browsers drop it, so such an ID would address the route instead. The path
// form /events/<route>/<id> and /replay/<route>/<id> still works ("/" written %2F, and "." or ".."
// written %2E, which Go's mux leaves alone): the CLI sends it, as servers from before ?id= read
// it the same way. An empty ID is refused (400), and so is a replay that names neither an ID nor all=1:
// replaying every dead letter is never what a missing ID means.
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

func (a *AdminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	parts, err := pathParts(r.URL.EscapedPath())
	switch {
	case err == nil && len(parts) == 1 && parts[0] == "ui":
		return a.serveUI(w, r)
	case err == nil && len(parts) == 1 && parts[0] == "routes":
		return a.routes(w, r)
	case err != nil || len(parts) < 2 || len(parts) > 3:
		return apiError(http.StatusNotFound, errors.New("use /hookgate/ui, /hookgate/routes, /hookgate/events/<route>[?id=<id>], /hookgate/replay/<route>?id=<id>|all=1 or /hookgate/status/<route>, with / in a route written %2F"))
	}
	if counts := findMonitored(parts[1]); counts != nil && parts[0] == "status" { // a sync route in monitor mode (monitor.go)
		return counts.serveStatus(w, r, parts)
	}
	sender, err := findDeliverer(parts[1], r.URL.Query().Get("dest"))
	isStatus := parts[0] == "status" && r.Method == http.MethodGet && (len(parts) == 2 || parts[2] == "")
	switch {
	case errors.Is(err, errSeveralDestinations) && isStatus:
		return a.statusOfAll(w, r, parts[1])
	case errors.Is(err, errSeveralDestinations):
		return apiError(http.StatusBadRequest, err)
	case err != nil:
		return apiError(http.StatusNotFound, err)
	}
	verb := parts[0] + " " + r.Method
	if verb == "status GET" && (len(parts) == 2 || parts[2] == "") {
		return a.status(w, r, sender)
	}
	if verb != "events GET" && verb != "replay POST" && verb != "skip POST" {
		return apiError(http.StatusMethodNotAllowed, fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path))
	}
	id, named, err := eventID(r, parts)
	switch {
	case err != nil:
		return apiError(http.StatusBadRequest, err)
	case verb == "events GET" && !named:
		return a.list(w, r, sender)
	case verb == "events GET":
		ev, err := sender.queue().Get(r.Context(), sender.key.queue(), id)
		if err != nil {
			return eventError(r.Context(), sender, id, err)
		}
		return writeJSON(w, viewOf(ev))
	case verb == "skip POST" && !named:
		return apiError(http.StatusBadRequest, errors.New("say which dead letter holding its key to skip with ?id=<id>"))
	case verb == "skip POST":
		return a.skip(w, r, sender, id)
	}
	return a.replay(w, r, sender, id, named)
}

// eventID is the event a request names, by ?id= or by the path's third segment, and whether it
// names one. An empty ID is an error, not "no ID": an unset variable in a script must not turn a
// request about one event into one about every event.
func eventID(r *http.Request, parts []string) (id string, named bool, err error) {
	ids, inQuery := r.URL.Query()["id"]
	switch {
	case inQuery && len(parts) == 3:
		return "", false, errors.New("give the event ID either in the path or as ?id=, not both")
	case inQuery && len(ids) > 1:
		return "", false, errors.New("give one event ID (?id= once)")
	case inQuery:
		id = ids[0]
	case len(parts) == 3:
		id = parts[2]
	default:
		return "", false, nil
	}
	if id == "" {
		return "", false, errors.New(`the event ID is empty: give one as ?id=<id> (an ID of "." or ".." too); every dead letter is replayed with POST ?all=1 only`)
	}
	return id, true, nil
}

// skip releases the key a dead head holds (dedupe.Orderer.Skip): the next event of its key
// goes on, and the head stays a dead letter, kept for dead_ttl from now.
func (a *AdminAPI) skip(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer, id string) error {
	err := sender.queue().Skip(r.Context(), sender.key.queue(), id, time.Now(), sender.config().DeadKeep)
	switch {
	case errors.Is(err, dedupe.ErrNotHeld):
		return apiError(http.StatusConflict, fmt.Errorf("event %q on route %s holds no key: only a dead letter holding its key can be skipped", id, sender.key.name))
	case err != nil:
		return eventError(r.Context(), sender, id, err)
	}
	sender.Notify()
	return writeJSON(w, map[string]any{"route": sender.key.name, "skipped": 1})
}

// routeStatus is an async route's destination's state for operators.
type routeStatus struct {
	deliver.Status
	// Backlog is the number of the destination's undelivered events, waiting or being attempted.
	Backlog int `json:"backlog"`
	// MaxPending is the backlog at which new events are refused with 503.
	MaxPending int `json:"max_pending"`
	// HeldKeys is the number of keys held by a dead head, on an ordered destination, or on one
	// that holds any (held before a reload removed its order).
	HeldKeys *int `json:"held_keys,omitempty"`
	// Held names the first heldListed held keys, by key, with their dead heads and the number of
	// events waiting behind each: where an operator finds the ID to skip or replay.
	Held []dedupe.HeldKey `json:"held,omitempty"`
	rateView
	// err says why the backlog could not be read; the rest holds.
	err error
}

// heldListed is how many held keys the status names.
const heldListed = 10

// statusOf is the destination's state now.
func statusOf(ctx context.Context, sender *pooledDeliverer) routeStatus {
	cfg := sender.config()
	backlog, err := sender.queue().Pending(ctx, sender.key.queue())
	s := routeStatus{Status: sender.Status(), Backlog: backlog, MaxPending: cfg.MaxPending, err: err}
	// An unordered destination may still have keys held from before a reload removed its order.
	held, heldErr := sender.queue().CountHeld(ctx, sender.key.queue())
	switch ordered := sender.isOrdered(); {
	case ordered:
		s.HeldKeys, s.err = &held, cmp.Or(s.err, heldErr)
	case heldErr == nil && held > 0:
		s.HeldKeys = &held
	}
	if heldErr == nil && held > 0 {
		list, err := sender.queue().HeldKeys(ctx, sender.key.queue(), "", heldListed)
		s.Held, s.err = list, cmp.Or(s.err, err)
	}
	if err == nil { // the drain time is unknown without the backlog
		s.rateView = rateOf(cfg.Rate, backlog)
	} else {
		s.rateView = rateView{Rate: rateOf(cfg.Rate, 0).Rate}
	}
	return s
}

func (a *AdminAPI) status(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer) error {
	s := statusOf(r.Context(), sender)
	if s.err != nil {
		return apiError(http.StatusServiceUnavailable, fmt.Errorf("reading the backlog: %w", s.err))
	}
	return writeJSON(w, s)
}

// statusOfAll answers a route of several destinations' status without dest: each one's, by name.
func (a *AdminAPI) statusOfAll(w http.ResponseWriter, r *http.Request, route string) error {
	all := map[string]routeStatus{}
	var failed error
	deliverers.Range(func(k, v any) bool {
		if key := k.(deliveryKey); key.name == route {
			s := statusOf(r.Context(), v.(*pooledDeliverer))
			all[key.destination] = s
			failed = cmp.Or(failed, s.err)
		}
		return true
	})
	if failed != nil {
		return apiError(http.StatusServiceUnavailable, fmt.Errorf("reading the backlog: %w", failed))
	}
	return writeJSON(w, map[string]any{"route": route, "destinations": all})
}

// pathParts splits the escaped path after /hookgate/ into its unescaped segments, so an ID
// or route containing "/" can be addressed as %2F. A trailing slash after a route is kept as an
// empty ID (refused), not dropped: /replay/<route>/ is a request about an ID left out.
func pathParts(escaped string) ([]string, error) {
	parts := strings.Split(strings.TrimPrefix(escaped, "/hookgate/"), "/")
	if n := len(parts); n <= 2 && parts[n-1] == "" {
		parts = parts[:n-1] // /hookgate/ui/, /hookgate/events/
	}
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
	// OrderKey and Seq place an event of an ordered destination in its key's order; Holds says a
	// dead letter holds its key: the key's later events wait until it is replayed or skipped.
	OrderKey string `json:"order_key,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	Holds    bool   `json:"holds,omitempty"`
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
		OrderKey: ev.OrderKey, Seq: ev.Seq, Holds: ev.Holds,
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
	var unavailable *ledgerpool.Unavailable
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

// eventError answers for the ledger about one event, in the words of what the operator asked:
// which event, on which route, is not there, or in what state it is instead of dead.
func eventError(ctx context.Context, sender *pooledDeliverer, id string, err error) error {
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		return apiError(http.StatusNotFound, fmt.Errorf("event %q not found on route %s: delivered and superseded events are listed for keep, dead letters for dead_ttl", id, sender.key.name))
	case errors.Is(err, dedupe.ErrNotDead):
		if ev, getErr := sender.queue().Get(ctx, sender.key.queue(), id); getErr == nil {
			return apiError(http.StatusConflict, fmt.Errorf("event %q on route %s is %s, not dead: only a dead letter can be replayed", id, sender.key.name, ev.State))
		}
	}
	return storeError(err)
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

const (
	// defaultListLimit bounds a listing unless ?limit= says otherwise.
	defaultListLimit = 100
	// maxListLimit is the most events one listing returns, so a listing's memory stays small.
	maxListLimit = 1000
)

// listing is a page of a route's events in one state.
type listing struct {
	Route  string       `json:"route"`
	State  dedupe.State `json:"state"`
	Events []any        `json:"events"`
	// Next is the cursor to give as ?after= for the page after this one; empty on the last page.
	Next string `json:"next,omitempty"`
}

// list answers GET /hookgate/events/<route>: a page of the route's events in one state, oldest
// accepted first, from ?after= on.
func (a *AdminAPI) list(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer) error {
	q := r.URL.Query()
	state := dedupe.State(q.Get("state"))
	switch state {
	case "":
		state = dedupe.Pending
	case dedupe.Pending, dedupe.Delivered, dedupe.Dead, dedupe.Superseded:
	default:
		return apiError(http.StatusBadRequest, fmt.Errorf("state must be pending, delivered, dead or superseded"))
	}
	limit := defaultListLimit
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxListLimit {
			return apiError(http.StatusBadRequest, fmt.Errorf("limit must be a number from 1 to %d", maxListLimit))
		}
		limit = n
	}
	after, err := parseCursor(q.Get("after"))
	if err != nil {
		return apiError(http.StatusBadRequest, err)
	}
	// One event more than the page tells whether there is a page after it.
	var events []*dedupe.Event
	var view func(*dedupe.Event) any
	switch q.Get("fields") {
	case "":
		events, err = sender.queue().List(r.Context(), sender.key.queue(), state, after, limit+1)
		view = func(ev *dedupe.Event) any { return viewOf(ev) }
	case "delivery":
		// A Badger ledger reads an event's body with its request line; the page, which
		// lists a route's dead letters every few seconds, shows neither.
		events, err = sender.queue().ListDeliveries(r.Context(), sender.key.queue(), state, after, limit+1)
		view = func(ev *dedupe.Event) any { return deliveryOf(ev) }
	default:
		return apiError(http.StatusBadRequest, fmt.Errorf("fields must be delivery, or left out for the whole listing"))
	}
	if err != nil {
		return storeError(err)
	}
	page := listing{Route: sender.key.name, State: state, Events: make([]any, 0, min(len(events), limit))}
	if len(events) > limit {
		events = events[:limit]
		page.Next = formatCursor(events[limit-1].After())
	}
	for _, ev := range events {
		page.Events = append(page.Events, view(ev))
	}
	return writeJSON(w, page)
}

// formatCursor writes a listing's cursor for a URL: opaque, as only a listing makes one.
func formatCursor(c dedupe.Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.AcceptedAt.UnixNano(), 10) + ":" + c.ID))
}

// parseCursor reads ?after=; "" starts at the oldest event.
func parseCursor(s string) (dedupe.Cursor, error) {
	if s == "" {
		return dedupe.Cursor{}, nil
	}
	bad := errors.New("after must be a cursor a listing gave as next, unchanged")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return dedupe.Cursor{}, bad
	}
	at, id, ok := strings.Cut(string(raw), ":")
	nanos, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return dedupe.Cursor{}, bad
	}
	return dedupe.Cursor{AcceptedAt: time.Unix(0, nanos).UTC(), ID: id}, nil
}
