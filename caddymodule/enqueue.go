package caddymodule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/jsonpath"
)

// maxAsyncBody is the largest max_body of an async route: the queue stores an event of at most
// dedupe.MaxPayload bytes, and 1 MiB of it (Go's default limit on request headers, 64 times
// Caddy's) is left for the headers and request line stored with the body. A request whose
// headers take more, under a raised max_header_size, is answered 413 (dedupe.ErrTooLarge).
const maxAsyncBody = dedupe.MaxPayload - http.DefaultMaxHeaderBytes

// checkAsyncMaxBody refuses, at provision, a max_body that an async route could not queue:
// every request near it would be refused.
func (h *Handler) checkAsyncMaxBody() error {
	if !h.async() && len(h.Copies) == 0 || h.MaxBody <= maxAsyncBody {
		return nil
	}
	return fmt.Errorf("max_body %s is too large for an async route or copies: the queue stores at most %s per event, headers included, so max_body may be at most %s",
		humanize.IBytes(uint64(h.MaxBody)), humanize.IBytes(dedupe.MaxPayload), humanize.IBytes(maxAsyncBody))
}

// enqueue is async mode's hand-on: the dedupe record, the version advance and the event, queued
// for every destination that takes it, are committed in one synced ledger transaction, and only
// then does the provider get 202. An event no destination takes is answered 200 ignored and
// stored nowhere. A destination whose backlog is at max_pending makes the route answer 503: the
// ledger checks the bounds in the same step, so no burst takes a backlog past its bound. A
// duplicate or stale event is still answered 200 then: it would add nothing to the backlog, and a
// 503 would only make the provider retry it.
func (h *Handler) enqueue(out *outcome, r *http.Request, body []byte, doc *jsonpath.Body, claim dedupe.Claim) error {
	taken, err := h.takers(&claim, r, doc)
	switch {
	case err != nil:
		return out.reject(http.StatusBadRequest, err)
	case !taken:
		return out.ignored(reasonNoDestination)
	}
	ev := &dedupe.Event{
		Namespace:  h.Name,
		ID:         claim.ID,
		Entity:     claim.Entity,
		Version:    claim.Version,
		Method:     r.Method,
		URI:        r.URL.RequestURI(),
		Header:     h.storedHeader(r.Header),
		Body:       body,
		Scheme:     h.scheme,
		AcceptedAt: time.Now(),
	}
	if ev.ID == "" { // dedupe off: the queue still needs a key, and the upstream an ID to log
		ev.ID = randomEventID()
		out.event(ev.ID, ev.Scheme)
	}
	h.keepURLForResign(ev, r)
	found, err := h.ledger.Accept(r.Context(), claim, ev, time.Duration(h.DedupeTTL))
	if errors.Is(err, dedupe.ErrTooLarge) {
		return out.reject(http.StatusRequestEntityTooLarge, fmt.Errorf("request too large to queue (body and headers over %s)", humanize.IBytes(dedupe.MaxPayload)))
	}
	if err == nil && found == dedupe.Full {
		return h.refuseFull(out, r.Context(), claim)
	}
	if answered, err := h.answerUnlessNew(out, "accept", found, err); answered {
		return err
	}
	h.noteDrained(r.Context())
	h.app.notify(h.key)
	out.accepted()
	return out.acknowledge(ev.ID)
}

// reasonNoDestination is {http.hookgate.reason} of an accepted event no destination's `only`
// takes.
const reasonNoDestination = "no destination takes the event"

// refuseFull answers 503 for an event a destination's backlog has no room for, naming the
// destination when the route has several.
func (h *Handler) refuseFull(out *outcome, ctx context.Context, claim dedupe.Claim) error {
	d := h.fullDestination(ctx, claim)
	if d == nil { // drained since the ledger refused: the provider's retry will find room
		return out.busy(reasonBacklogFull, "backlog of undelivered events is at max_pending")
	}
	h.noteFull(d, true)
	if len(h.destinations) == 1 {
		return out.busy(reasonBacklogFull, fmt.Sprintf("backlog of undelivered events is at max_pending (%d)", d.cfg.MaxPending))
	}
	return out.busy(reasonBacklogFull, fmt.Sprintf("backlog of undelivered events for destination %s is at max_pending (%d)", d.name, d.cfg.MaxPending))
}

// storedHeader copies the request's headers that a queued event keeps: all but Content-Length,
// which each delivery recomputes from the body (deliver/request.go). The map is sized for the
// signed URL that keepURLForResign may add, and the values share one allocation, as in
// Header.Clone, sized for one value a header (what requests carry) rather than counted in a
// second pass over the map.
func (h *Handler) storedHeader(in http.Header) http.Header {
	stored := len(in)
	if _, ok := in["Content-Length"]; ok {
		stored--
	}
	names := stored
	if h.keepSignedURL {
		names++
	}
	out := make(http.Header, names)
	shared := make([]string, 0, stored)
	for name, vv := range in {
		switch {
		case name == "Content-Length":
		case vv == nil: // kept as Header.Clone keeps it
			out[name] = nil
		default:
			n := len(shared)
			shared = append(shared, vv...)
			out[name] = shared[n:len(shared):len(shared)]
		}
	}
	return out
}

// randomEventID is the ID of an event the provider sent none for (dedupe off): the queue still
// needs a key, and the upstream an ID to log.
func randomEventID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "evt_" + hex.EncodeToString(b)
}
