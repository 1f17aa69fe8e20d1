package caddymodule

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/verify"
)

// Twilio, Square and HubSpot sign the URL they called (HubSpot the method too). Behind a load
// balancer that is not the URL Caddy sees, so the operator names it with public_url, or trusts the
// proxy's X-Forwarded-Proto and X-Forwarded-Host through the server's trusted_proxies.

// checkPublicURL refuses a public_url the scheme would never use, or one that is no http(s) URL.
func (h *Handler) checkPublicURL() error {
	cfg := h.verifier.Config()
	h.signsURL = cfg.SignsURL()
	if h.PublicURL == "" {
		return h.checkSiteHosts() // sitehosts.go
	}
	if !h.signsURL {
		return fmt.Errorf("public_url is set but the %s scheme does not sign the URL (twilio, square and hubspot do)", h.scheme)
	}
	if strings.Contains(h.PublicURL, "{") {
		return nil // placeholders: checked once expanded, per request
	}
	if _, err := verify.ParsePublicURL(h.PublicURL); err != nil {
		return fmt.Errorf("public_url: %w", err)
	}
	return nil
}

// message is the request as the scheme signs it: the method and public URL only when it signs them.
func (h *Handler) message(r *http.Request, body []byte) verify.Message {
	m := verify.Message{Header: r.Header, Body: body}
	if h.signsURL {
		original := originalRequest(r)
		m.Method, m.URL = original.Method, h.publicURL(r, original.RequestURI)
	}
	return m
}

// originalRequest is the request as it arrived, before any rewrite by an earlier handler.
func originalRequest(r *http.Request) *http.Request {
	if original, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		return &original
	}
	return r
}

// publicURL is the URL the provider called: public_url, its placeholders expanded and, when it has
// no path (or just "/"), the request's path and query appended; or, by default, the request's own URL.
func (h *Handler) publicURL(r *http.Request, requestURI string) string {
	if h.PublicURL == "" {
		scheme, host := requestOrigin(r)
		return scheme + "://" + host + requestURI
	}
	public := h.PublicURL
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		public = repl.ReplaceAll(public, "")
	}
	return verify.PublicURL(public, requestURI) // a bad expansion simply fails to verify
}

// requestOrigin is the scheme and host the request came to: `https` over TLS else `http`, and
// its Host; from a server's trusted_proxies, the last X-Forwarded-Proto and X-Forwarded-Host.
// Without public_url the host must be one of the site's (checkRequestHost, sitehosts.go).
func requestOrigin(r *http.Request) (scheme, host string) {
	scheme, host = "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); trusted {
		scheme = forwarded(r.Header, "X-Forwarded-Proto", scheme)
		host = forwarded(r.Header, "X-Forwarded-Host", host)
	}
	return scheme, host
}

// forwarded is the last value of a proxy's X-Forwarded-* header, across its lines: the one the
// nearest proxy, the trusted one, wrote. A proxy that appends keeps what the client sent in front,
// where it must not choose the URL the signature is checked against. A value that could carry
// more than a scheme or a host is ignored, and fallback used.
func forwarded(h http.Header, name, fallback string) string {
	lines := h.Values(name)
	if len(lines) == 0 {
		return fallback
	}
	last := lines[len(lines)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	if last = strings.TrimSpace(last); last == "" || strings.ContainsAny(last, "/?#@ \t") {
		return fallback
	}
	return last
}
