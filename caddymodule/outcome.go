package caddymodule

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookgate/hookgate/verify"
)

// retryAfterSeconds is what a provider is told to wait when the ledger is down or the same event
// is still in flight.
const retryAfterSeconds = "5"

// outcome answers the provider and publishes what happened as {http.hookgate.*} placeholders, for
// logs and matchers. It resolves them itself, as one replacer provider, rather than Set each one:
// Set grows the replacer's map on every request, which showed in the allocation profiles.
type outcome struct {
	w http.ResponseWriter
	// The placeholders' values; an empty one is left unknown, as if never set.
	eventID, scheme, result, reason string
	// status is the answer's status when hookgate answered itself (0 when the next handler did).
	status int
	// class is the refusal's reason class, for metrics (metrics.go).
	class string
	// contentType and answer hold the Content-Type's value and a receipt's bytes, so that an
	// answer allocates nothing beside the outcome.
	contentType [1]string
	receipt     [96]byte
}

const placeholderPrefix = "http.hookgate."

func newOutcome(w http.ResponseWriter, r *http.Request) *outcome {
	o := &outcome{w: w}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Map(o.placeholder)
	}
	return o
}

// placeholder resolves {http.hookgate.event_id}, scheme, outcome and reason.
func (o *outcome) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, placeholderPrefix)
	if !ok {
		return nil, false
	}
	var v string
	switch name {
	case "event_id":
		v = o.eventID
	case "scheme":
		v = o.scheme
	case "outcome":
		v = o.result
	case "reason":
		v = o.reason
	}
	return v, v != ""
}

// event records the event ID and scheme once they are known.
func (o *outcome) event(id, scheme string) {
	o.eventID, o.scheme = id, scheme
}

// accepted marks the event as handed on.
func (o *outcome) accepted() {
	o.result = "accepted"
}

// released records that the next handler failed the event (5xx, 408, 429 or an error), so its
// claim was released for the provider's retry: it was handed on, not taken.
func (o *outcome) released() {
	o.result = "released"
}

// reject refuses a request that is not authentic or not well-formed. The error's words are the
// reason, and never carry a secret or an expected signature.
func (o *outcome) reject(status int, err error) error {
	o.reason, o.class = err.Error(), rejectClass(status, err)
	return o.write(status, "rejected", refusal{Error: o.reason})
}

// busy answers 503 when the event cannot be durably recorded: never a 2xx for that. class is the
// reason's class (metrics.go).
func (o *outcome) busy(class, reason string) error {
	o.reason, o.class = reason, class
	o.w.Header().Set("Retry-After", retryAfterSeconds)
	return o.write(http.StatusServiceUnavailable, "busy", refusal{Error: reason})
}

// conflict answers 409 while another request holds the claim on the same event ID: the first one
// may still fail, so the provider should retry rather than be told "duplicate".
func (o *outcome) conflict(reason string) error {
	o.reason, o.class = reason, reasonInFlight
	o.w.Header().Set("Retry-After", retryAfterSeconds)
	return o.write(http.StatusConflict, "busy", refusal{Error: reason})
}

// answer acknowledges an event that is not handed on (duplicate or stale).
func (o *outcome) answer(status int, what, body string) error {
	o.reason = what
	return o.write(status, what, json.RawMessage(body))
}

// ignored acknowledges an event the route's `only` filters leave out (event.go), so that the
// provider does not retry it; reason names the filter it failed.
func (o *outcome) ignored(reason string) error {
	o.reason = reason
	return o.write(http.StatusOK, "ignored", json.RawMessage(`{"received":true,"ignored":true}`))
}

// handshake answers the provider's endpoint check with the scheme's reply; nothing is recorded.
func (o *outcome) handshake(scheme string, reply verify.Reply) error {
	o.scheme, o.result, o.status = scheme, "handshake", reply.Status
	if reply.ContentType != "" {
		o.w.Header().Set("Content-Type", reply.ContentType)
	}
	o.w.WriteHeader(reply.Status)
	_, err := o.w.Write(reply.Body)
	return err
}

// refusal is the body of every 4xx/5xx hookgate answers itself.
type refusal struct {
	Received bool   `json:"received"`
	Error    string `json:"error"`
}

// receipt is async mode's 202 body.
type receipt struct {
	Received bool   `json:"received"`
	ID       string `json:"id"`
}

func (o *outcome) write(status int, what string, body any) error {
	o.header(status, what)
	return json.NewEncoder(o.w).Encode(body)
}

// header sends the status of an answer in JSON.
func (o *outcome) header(status int, what string) {
	o.result, o.status = what, status
	o.contentType[0] = "application/json"
	o.w.Header()["Content-Type"] = o.contentType[:] // as Header.Set
	o.w.WriteHeader(status)
}

// acknowledge answers 202 with the receipt of event id: the bytes json.Encoder writes for
// receipt{Received: true, ID: id}, laid out by hand when id needs no escaping.
func (o *outcome) acknowledge(id string) error {
	if !plainJSON(id) {
		return o.write(http.StatusAccepted, "accepted", receipt{Received: true, ID: id})
	}
	o.header(http.StatusAccepted, "accepted")
	b := append(o.receipt[:0], `{"received":true,"id":"`...)
	b = append(b, id...)
	b = append(b, "\"}\n"...)
	_, err := o.w.Write(b)
	return err
}

// plainJSON reports whether s is written in JSON as it is: printable ASCII that encoding/json
// (HTML-safe, as json.Encoder writes) does not escape.
func plainJSON(s string) bool {
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// logRequest writes a request's one line in the handler's log (http.handlers.hookgate): at INFO for
// a request refused for good (not authentic, not well-formed, too large), at DEBUG for every other
// outcome. A busy refusal (503, 409) is DEBUG too: its cause (ledger down, disk or backlog full) is
// logged once per change of state where it is found (docs/architecture.md, "Logging once per change
// of state"), and a provider retrying through an outage would otherwise bury that line under one
// per request. An event the route's `only` filters leave out is DEBUG as well: that is the
// configuration at work, for every event of the types the app does not want. Under monitor, every
// request that would not have been accepted is at INFO: seeing them is the point. The line carries
// the reason already sent in the body, never a secret, a signature or a body.
func (h *Handler) logRequest(out *outcome, r *http.Request) {
	if out.result == "" {
		return
	}
	level := zapcore.DebugLevel
	if out.result == "rejected" || h.Monitor && out.result != "accepted" && out.result != "released" {
		level = zapcore.InfoLevel // monitor: every request that would not have been accepted
	}
	// The common case, an accepted request with DEBUG off, costs nothing more: not even the
	// message's concatenation.
	if !h.logger.Core().Enabled(level) {
		return
	}
	line := h.logger.Check(level, "webhook "+out.result)
	if line == nil {
		return
	}
	fields := []zap.Field{zap.String("route", h.Name), zap.String("outcome", out.result), zap.String("client_ip", clientIP(r))}
	status := "status"
	if h.Monitor { // the app answered: the status is what hookgate would have
		fields = append(fields, zap.String("mode", modeMonitor))
		status = "would_status"
	}
	if out.status != 0 {
		fields = append(fields, zap.Int(status, out.status))
	}
	if out.reason != "" && out.reason != out.result {
		fields = append(fields, zap.String("reason", out.reason))
	}
	if out.eventID != "" {
		fields = append(fields, zap.String("event_id", out.eventID))
	}
	line.Write(fields...)
}

// clientIP is the client's address as Caddy determined it (trusted proxies honoured), or the
// connection's remote address.
func clientIP(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return r.RemoteAddr
}
