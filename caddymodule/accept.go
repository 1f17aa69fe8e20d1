package caddymodule

import (
	"net/http"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// enqueue is async mode's hand-on: the dedupe record, the version advance and the queued event
// are committed in one synced ledger transaction, and only then does the provider get 202.
func (h *Handler) enqueue(out *outcome, r *http.Request, body []byte, claim dedupe.Claim) error {
	ev := &dedupe.Event{
		Namespace:  h.Name,
		ID:         claim.ID,
		Entity:     claim.Entity,
		Version:    claim.Version,
		Method:     r.Method,
		URI:        r.URL.RequestURI(),
		Header:     r.Header.Clone(),
		Body:       body,
		Scheme:     h.scheme,
		AcceptedAt: time.Now(),
	}
	if ev.ID == "" { // dedupe off: the queue still needs a key, and the upstream an ID to log
		ev.ID = randomEventID()
		out.event(ev.ID, ev.Scheme)
	}
	found, err := h.ledger.Accept(r.Context(), claim, ev, time.Duration(h.DedupeTTL))
	if answered, err := h.answerUnlessNew(out, "accept", found, err); answered {
		return err
	}
	h.app.notify(routeKey{dir: h.ledger.dir, name: h.Name})
	out.accepted()
	return out.write(http.StatusAccepted, "accepted", receipt{Received: true, ID: ev.ID})
}
