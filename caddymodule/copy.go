package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/jsonpath"
)

// A sync route's copies let a new service shadow the app behind the route while that app still
// answers the provider: every event the app takes (answers 2xx) is also queued, durably, for each
// copy destination whose filters take it, and delivered with retries and dead letters. The app's
// 2xx is held until the claim is marked done and the event queued for the copies, in one synced
// write (DoneAndQueue): a provider told 2xx has the copies' deliveries on disk, whatever crashes
// after. An event the app did not take is not copied: its claim is released and the provider
// retries it, to the app and then to the copies. If the write fails, the provider is answered 503
// instead of the app's 2xx and retries; the app then sees the event again, as at-least-once allows.

// copyHold is a sync-mode event on its way to the app, with the copies that take it.
type copyHold struct {
	h     *Handler
	out   *outcome
	claim dedupe.Claim // its Destinations are the copies that take the event
	ev    *dedupe.Event
	// committed is set once the claim is done and the copies queued; failed once that write
	// failed and the provider was answered 503 in place of the app's answer.
	committed, failed bool
}

// copyFor is the copy of the event the route hands on, or nil when the route has no copy or none
// takes the event. It is taken before anything changes the request's headers for the app
// (sign_upstream): a copy is delivered as the provider sent it, and signed as its own
// destination says.
func (h *Handler) copyFor(out *outcome, r *http.Request, body []byte, doc *jsonpath.Body, claim dedupe.Claim) (*copyHold, error) {
	if len(h.Copies) == 0 {
		return nil, nil
	}
	if taken, err := h.takers(&claim, r, doc); err != nil || !taken {
		return nil, err
	}
	ev := &dedupe.Event{
		Namespace: h.Name, ID: claim.ID, Entity: claim.Entity, Version: claim.Version,
		Method: r.Method, URI: r.URL.RequestURI(), Header: h.storedHeader(r.Header), Body: body,
		Scheme: h.scheme, AcceptedAt: time.Now(),
	}
	if ev.ID == "" { // dedupe off: the queue still needs a key
		ev.ID = randomEventID()
	}
	h.keepURLForResign(ev, r)
	return &copyHold{h: h, out: out, claim: claim, ev: ev}, nil
}

// commit marks the claim done and queues the copies, once, as the app's 2xx is about to go out,
// and reports whether it may. When the write fails it answers the provider 503 itself, dropping
// the headers the app's answer had set.
func (c *copyHold) commit(header http.Header) bool {
	if c.committed || c.failed {
		return c.committed
	}
	err := c.h.ledger.DoneAndQueue(settleContext(time.Now()), c.claim, c.ev, time.Duration(c.h.DedupeTTL))
	if err != nil {
		c.failed = true
		clear(header)
		_ = c.h.ledgerFailed(c.out, "copy", err)
		return false
	}
	c.committed = true
	c.h.app.notify(c.h.key)
	return true
}

// ReadFrom is the recorder's io.ReaderFrom, which reverse_proxy copies the app's body through:
// it goes through the copy's hold as Write does.
func (s *statusRecorder) ReadFrom(r io.Reader) (int64, error) {
	if !s.pass() {
		return io.Copy(io.Discard, r)
	}
	return s.ResponseWriterWrapper.ReadFrom(r)
}

// FlushError is the recorder's flush, which http.ResponseController finds before the writer it
// wraps: a flush before any status sends net/http's implicit 200, so it goes through the copy's
// hold as Write does.
func (s *statusRecorder) FlushError() error {
	if !s.pass() {
		return nil
	}
	return http.NewResponseController(s.ResponseWriterWrapper.ResponseWriter).Flush()
}

// Hijack is the recorder's: on a route with copies it is refused, since an answer written on the
// bare connection could not be held until the copies are queued, nor its status read to tell
// whether the app took the event.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if s.copy != nil {
		return nil, nil, fmt.Errorf("hookgate: a route with copies holds the app's answer until they are queued: %w", http.ErrNotSupported)
	}
	return http.NewResponseController(s.ResponseWriterWrapper.ResponseWriter).Hijack()
}

// pass notes an implicit 200 (the app wrote its body without a status) and reports whether the
// app's answer goes on to the provider: not once a copy's write failed and 503 went out instead.
func (s *statusRecorder) pass() bool {
	if s.status == 0 {
		s.status = http.StatusOK
		if s.copy != nil {
			return s.copy.commit(s.Header())
		}
	}
	return s.copy == nil || !s.copy.failed
}
