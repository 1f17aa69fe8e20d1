package caddymodule

import (
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/deliver"
)

// The app trusts Hookgate-Verified and Hookgate-Event-Id, so no request hookgate did not pass may
// reach it carrying them. hookgate strips them from what it handles; a request its matcher misses
// (`/hooks/github/` beside `hookgate /hooks/github`, matched exactly) would go on to the site's
// reverse_proxy with the client's own. So the Caddyfile directive also emits, at hookgate's place
// in the same route list, an unmatched route that strips them from every request hookgate did not
// pass, before any handler ordered after hookgate (request_header, handle, respond, reverse_proxy).

func init() {
	caddy.RegisterModule(new(StripHeaders))
}

// StripHeaders removes every incoming Hookgate-* header (deliver.OwnHeader's spellings) from
// requests that no hookgate handler passed on; those it passed keep the headers it set. The
// hookgate Caddyfile directive adds it by itself; a JSON config puts it in front of the app.
type StripHeaders struct{}

// CaddyModule returns the Caddy module information.
func (*StripHeaders) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.hookgate_strip",
		New: func() caddy.Module { return new(StripHeaders) },
	}
}

// ServeHTTP strips, unless hookgate passed the request, and goes on.
func (*StripHeaders) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if _, passed := caddyhttp.GetVar(r.Context(), passedVar).(passedMark); !passed {
		stripHookgateHeaders(r.Header)
		if r.Trailer != nil && r.Body != nil { // trailers were announced: they come after the body
			r.Body = &trailerStripper{ReadCloser: r.Body, trailer: r.Trailer}
		}
	}
	return next.ServeHTTP(w, r)
}

// trailerStripper drops our headers from a request's trailers as its body ends: they arrive after
// it, when every handler has long looked at the headers, and reverse_proxy hands them on. net/http
// fills the announced trailers into this same map at the body's end (unannounced ones go to a map
// Caddy's copy of the request never sees, and so are not handed on).
type trailerStripper struct {
	io.ReadCloser
	trailer http.Header
}

func (b *trailerStripper) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		stripHookgateHeaders(b.trailer)
	}
	return n, err
}

// passedVar is the request variable hookgate marks what it verified and set its headers on with a
// passedMark. Caddy gives every request a variable table, so the mark costs no copy of the
// request; a config or placeholder can set the name, but only to a string or JSON value, never
// to this unexported type.
const passedVar = "hookgate.passed"

type passedMark struct{}

// markPassed marks r as hookgate hands it on: StripHeaders leaves its headers alone.
func markPassed(r *http.Request) {
	caddyhttp.SetVar(r.Context(), passedVar, passedMark{})
}

// stripHookgateHeaders drops every incoming Hookgate-* header: they are ours to set.
func stripHookgateHeaders(hdr http.Header) {
	for name := range hdr {
		if deliver.OwnHeader(name) {
			delete(hdr, name)
		}
	}
}

// parseDirective is the hookgate directive: the handler on its matcher's requests and, when it
// has a matcher, a StripHeaders route for every request. The strip route comes first; the
// Caddyfile sorts unmatched routes after matched ones of the same directive, which the passed
// mark makes harmless, while inside `route { }` blocks it runs before hookgate.
func parseDirective(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	matcherSet, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	handler, err := parseCaddyfile(h)
	if err != nil {
		return nil, err
	}
	route := h.NewRoute(matcherSet, handler)
	if matcherSet == nil { // every request of the route list goes through hookgate
		return route, nil
	}
	return append(h.NewRoute(nil, new(StripHeaders)), route...), nil
}

var _ caddyhttp.MiddlewareHandler = (*StripHeaders)(nil)
