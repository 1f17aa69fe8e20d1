package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/jsonpath"
)

// ServeHTTP is the story of one webhook (docs/architecture.md, "A request's story"): strip our
// headers, refuse on the headers alone what can never verify, reserve the body's memory in the
// server's budget (body.go), read the raw body, verify, answer the provider's endpoint check
// itself (never forwarded nor recorded), answer 200 ignored an event the route's `only` filters
// leave out (event.go), extract the event (JSON read as the app will, internal/jsonpath), then either
// queue it durably and answer 202 (async mode), or claim it in the ledger, hand it to the next
// handler (with the gateway's signature under sign_upstream, signupstream.go), and mark it done or
// release it (sync mode). An ID the signature does not cover is claimed together with the digest
// of the signed bytes (event.go).
//
// Under monitor, every request goes on to the next handler as it came, and is only classified
// (monitor.go).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.Monitor {
		return h.monitor(w, r, next)
	}
	return h.serve(newOutcome(w, r), w, r, next)
}

// serve tells the story, answering through out and handing on to next through w.
func (h *Handler) serve(out *outcome, w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	defer h.logRequest(out, r) // outcome.go
	defer h.countRequest(out)  // metrics.go
	stripHookgateHeaders(r.Header)

	if err := h.verifier.CheckHeaders(r.Header, time.Now()); err != nil {
		return out.unread(r).reject(http.StatusUnauthorized, err)
	}
	if err := h.checkRequestHost(r); err != nil { // the host of a signed URL (message.go)
		return out.unread(r).reject(http.StatusUnauthorized, err)
	}
	held, answered, err := h.reserveBody(out, r)
	if answered {
		return err
	}
	defer held.release() // after the next handler, which is handed the body
	var pooled *handedBody
	if h.poolsBody(r.ContentLength) { // not async: an event's body goes into the ledger, which may keep it
		pooled = takeBody(r.ContentLength)
		defer pooled.done()
	}
	body, status, err := readBody(r, h.MaxBody, pooled.buffer())
	if err != nil {
		return out.reject(status, err)
	}
	stripHookgateHeaders(r.Trailer) // read with the body, and handed on with it by reverse_proxy
	// What was signed besides the body: the public URL, for schemes that sign it, or a timestamp
	// inside the body (message.go).
	msg := h.message(r, body)
	doc := jsonpath.NewBody(body) // read, if at all, as the app will (internal/jsonpath)
	verified, err := h.verify(&msg, &doc, time.Now())
	held.verified() // verification's own buffers are no longer held (body.go)
	if err != nil {
		return out.reject(verifyStatus(err), err)
	}
	if reply, ok := h.verifier.Handshake(verified, &msg); ok { // the provider's endpoint check
		return out.handshake(h.scheme, reply)
	}
	if answered, err := h.filter(out, r, &doc); answered { // the route's `only` filters (event.go)
		return err
	}
	claim, err := h.claimFor(r, &doc, verified)
	if err != nil {
		return out.reject(http.StatusBadRequest, err)
	}
	out.event(claim.ID, h.scheme)
	if h.async() {
		return h.enqueue(out, r, body, &doc, claim)
	}
	copied, err := h.copyFor(out, r, body, &doc, claim) // copies (copy.go)
	if err != nil {
		return out.reject(http.StatusBadRequest, err)
	}
	if err := h.signHandedOn(r, claim.ID, body); err != nil { // sign_upstream (signupstream.go)
		return out.reject(http.StatusInternalServerError, err)
	}

	found, err := h.ledger.Claim(r.Context(), claim)
	if answered, err := h.answerUnlessNew(out, "claim", found, err); answered {
		return err
	}
	out.accepted()
	r.Body = pooled.reader(body)
	rec := &statusRecorder{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, copy: copied}
	rec.own = [2]string{claim.ID, h.scheme}
	r.Header["Hookgate-Event-Id"] = rec.own[0:1:1] // as Header.Set, in the recorder's allocation
	r.Header["Hookgate-Verified"] = rec.own[1:2:2]
	markPassed(r) // so that the directive's strip route keeps them (ownheaders.go)
	return h.handOn(out, rec, r, next, claim)
}

// handOn calls the next handler and settles the claim by its answer, even when it panics:
// reverse_proxy aborts with http.ErrAbortHandler a response whose body the upstream broke off,
// after the upstream's status went out. The panic goes on once the claim is settled, so the
// provider's retry is a duplicate (the app answered) or processed again (it did not), never 409.
func (h *Handler) handOn(out *outcome, rec *statusRecorder, r *http.Request, next caddyhttp.Handler, claim dedupe.Claim) error {
	returned := false
	defer func() {
		if !returned {
			h.settleHandedOn(out, rec, claim, rec.status != 0 && processed(rec.status))
		}
	}()
	err := next.ServeHTTP(rec, r)
	returned = true
	taken := err == nil && (rec.status == 0 || processed(rec.status)) // nothing written: net/http answers 200
	if taken && rec.copy != nil && !rec.copy.commit(rec.Header()) {
		taken = false // the provider was answered 503
	}
	h.settleHandedOn(out, rec, claim, taken)
	return err
}

// settleHandedOn settles the claim by the app's answer, unless the copies' write did (copy.go).
func (h *Handler) settleHandedOn(out *outcome, rec *statusRecorder, claim dedupe.Claim, taken bool) {
	if rec.copy != nil && rec.copy.committed {
		return
	}
	taken = taken && (rec.copy == nil || !rec.copy.failed)
	if !taken && (rec.copy == nil || !rec.copy.failed) {
		out.released()
	}
	h.settle(claim, taken)
}

// answerUnlessNew answers the provider itself when the ledger found the event is not new, or
// could not tell; answered is false when the event is to be handed on.
func (h *Handler) answerUnlessNew(out *outcome, op string, found dedupe.Outcome, err error) (answered bool, _ error) {
	if err != nil {
		return true, h.ledgerFailed(out, op, err)
	}
	switch found {
	case dedupe.Duplicate:
		return true, out.answer(http.StatusOK, "duplicate", `{"received":true,"duplicate":true}`)
	case dedupe.Stale:
		return true, out.answer(http.StatusOK, "stale", `{"received":true,"stale":true}`)
	case dedupe.InFlight:
		return true, out.conflict("a request with this event ID is still being processed")
	}
	return false, nil
}

// routeLedger is what a route's requests use of its ledger: sync mode claims and settles,
// async mode accepts and reads its backlog.
type routeLedger interface {
	Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error)
	Done(ctx context.Context, c dedupe.Claim, ttl time.Duration) error
	Release(ctx context.Context, c dedupe.Claim) error
	Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) (dedupe.Outcome, error)
	DoneAndQueue(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) error
	Pending(ctx context.Context, namespace string) (int, error)
}

// ledgerFailed answers 503 when the ledger could not tell whether the event is new. It is apart
// from answerUnlessNew so that the common case, no error, allocates nothing for errors.As.
func (h *Handler) ledgerFailed(out *outcome, op string, err error) error {
	var unavailable *ledgerpool.Unavailable
	switch {
	case errors.As(err, &unavailable): // logged once, where it was found (ledgerpool)
		return out.busy(unavailableClass(unavailable), unavailable.Reason)
	case errors.Is(err, context.Canceled): // the provider hung up: the ledger is fine
		h.logger.Debug("ledger "+op+" abandoned by the client", zap.String("route", h.Name), zap.Error(err))
		return out.busy(reasonClientGone, "the request was canceled before the ledger answered")
	}
	h.logger.Error("ledger "+op+" failed", zap.String("route", h.Name), zap.Error(err))
	return out.busy(reasonLedgerDown, "ledger unavailable")
}

// settle marks the event done when the next handler succeeded, or releases the claim so the
// provider's retry is processed rather than dropped as a duplicate. It runs even if the client has
// gone away, because the work upstream happened either way: its context is not the request's, and
// ends about 10 s from now (settleContext).
func (h *Handler) settle(claim dedupe.Claim, ok bool) {
	ctx := settleContext(time.Now())
	var err error
	if ok {
		err = h.ledger.Done(ctx, claim, time.Duration(h.DedupeTTL))
	} else {
		err = h.ledger.Release(ctx, claim)
	}
	if err != nil {
		// The claim's lease lapses on its own; a retry before then gets 409, not silence.
		h.logger.Error("ledger settle failed", zap.String("route", h.Name), zap.Bool("done", ok), zap.Error(err))
	}
}

// processed reports whether the next handler's status says the app took the event: a 2xx. Any
// other answer releases the claim, so the provider's retry reaches the app again: a 401 from an
// app checking another secret or scheme, a 404 or 3xx during a deploy, is not the app having the
// event, and answering the retry 200 duplicate would lose it for good.
func processed(status int) bool {
	return status >= 200 && status < 300
}

// statusRecorder notes the status the next handler answered with. It holds the wrapper, and the
// values of the Hookgate-* headers handed on, in its own allocation.
type statusRecorder struct {
	caddyhttp.ResponseWriterWrapper
	status int
	own    [2]string // Hookgate-Event-Id, Hookgate-Verified
	// copy, on a route with copies that take the event, holds the app's 2xx until they are
	// queued (copy.go).
	copy *copyHold
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
		if s.copy != nil && processed(code) && !s.copy.commit(s.Header()) {
			return
		}
	}
	if s.copy != nil && s.copy.failed {
		return
	}
	s.ResponseWriterWrapper.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if !s.pass() {
		return len(b), nil
	}
	return s.ResponseWriterWrapper.Write(b)
}

const (
	// settleTimeout bounds marking an event done or releasing its claim (settle); a claim left
	// unsettled lapses with its lease.
	settleTimeout = 10 * time.Second
	// settleRenewal is how long one settle context is handed out, so each settle gets between
	// settleTimeout−settleRenewal and settleTimeout.
	settleRenewal = time.Second
)

// settleDeadlines hands the settles of all requests one context per settleRenewal, rather than
// each its own: a context with its own timer, detached from the request's, cost every sync-mode
// request five allocations, a fifth of its total. The context carries no value of the request's,
// which the ledgers never read.
var settleDeadlines atomic.Pointer[settleDeadline]

// settleDeadline is one shared settle context.
type settleDeadline struct {
	ctx     context.Context
	cancel  context.CancelFunc
	renewAt time.Time
}

// settleContext returns a context that ends about settleTimeout from now.
func settleContext(now time.Time) context.Context {
	current := settleDeadlines.Load()
	if current != nil && now.Before(current.renewAt) {
		return current.ctx
	}
	next := &settleDeadline{renewAt: now.Add(settleRenewal)}
	next.ctx, next.cancel = context.WithDeadline(context.Background(), now.Add(settleTimeout))
	if !settleDeadlines.CompareAndSwap(current, next) {
		next.cancel() // another settle renewed it first: this one is never handed out
		return settleDeadlines.Load().ctx
	}
	return next.ctx
}
