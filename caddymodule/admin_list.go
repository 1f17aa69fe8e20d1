package caddymodule

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

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
		events, err = sender.queue().List(r.Context(), sender.key.name, state, after, limit+1)
		view = func(ev *dedupe.Event) any { return viewOf(ev) }
	case "delivery":
		// A Badger ledger reads an event's body with its request line; the page, which
		// lists a route's dead letters every few seconds, shows neither.
		events, err = sender.queue().ListDeliveries(r.Context(), sender.key.name, state, after, limit+1)
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
