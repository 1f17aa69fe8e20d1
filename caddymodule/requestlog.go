package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

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
