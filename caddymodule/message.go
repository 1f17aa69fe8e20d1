package caddymodule

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/internal/jsonpath"
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
		return h.checkSiteHosts()
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
// Without public_url the host must be one of the site's (checkRequestHost).
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

// Without public_url, the URL a URL-signing scheme's signature is checked against is rebuilt from
// the request's Host (or a trusted proxy's last X-Forwarded-Host, which many proxies pass on from
// the client): the sender chooses it. Twilio and Square sign no timestamp, so a request captured
// at staging.example.com, sent to production with that host, would verify there for ever. The
// rebuilt host is held to the site's own host names (SiteHosts), which the Caddyfile adapter takes
// from the site's addresses; a site that takes any host must name the URL with public_url.

// fillSiteHosts sets SiteHosts from the addresses of the site block the directive is in, when
// public_url is unset and every address names an exact host; otherwise it leaves it empty, and a
// URL-signing scheme is then refused at provision time.
func (h *Handler) fillSiteHosts(helper httpcaddyfile.Helper) {
	if h.PublicURL == "" && !helper.IsNamedRoute() { // a named route runs in any site
		h.SiteHosts = siteHosts(siteAddresses(helper), helper.Option("http_port"), helper.Option("https_port"))
	}
}

// siteAddresses returns the addresses (keys) of the site block a directive is in. Caddy v2.11.9's
// Helper keeps its server block unexported and offers no accessor, so it is read by reflection;
// should a later Caddy rename it, none are found and URL-signing routes ask for public_url, which
// TestSiteHostsFromTheSiteAddresses catches.
func siteAddresses(helper httpcaddyfile.Helper) []string {
	block := reflect.ValueOf(helper).FieldByName("parentBlock")
	if block.Kind() != reflect.Struct {
		return nil
	}
	keys := block.FieldByName("Keys")
	if keys.Kind() != reflect.Slice {
		return nil
	}
	addresses := make([]string, 0, keys.Len())
	for i := range keys.Len() {
		key := keys.Index(i)
		if key.Kind() != reflect.Struct {
			return nil
		}
		text := key.FieldByName("Text")
		if text.Kind() != reflect.String {
			return nil
		}
		addresses = append(addresses, text.String())
	}
	return addresses
}

// siteHosts is the host:port of each site address, the port being the server's http_port or
// https_port when the address names none; nil unless every address names an exact host: a site
// such as `:8080`, `http://`, `*.example.com` or `{env.HOST}` takes hosts it does not list.
func siteHosts(addresses []string, httpPort, httpsPort any) []string {
	var hosts []string
	for _, raw := range addresses {
		addr, err := httpcaddyfile.ParseAddress(raw)
		if err != nil || addr.Host == "" || strings.ContainsAny(addr.Host+addr.Port, "*{}") {
			return nil
		}
		port := addr.Port
		if port == "" {
			port = defaultPort(addr.Scheme == "http", httpPort, httpsPort)
		}
		hosts = append(hosts, net.JoinHostPort(strings.ToLower(addr.Host), port))
	}
	return hosts
}

// defaultPort is the port Caddy serves a site address without one on: the http_port or https_port
// global option, else 80 or 443.
func defaultPort(http bool, httpPort, httpsPort any) string {
	option, fallback := httpsPort, "443"
	if http {
		option, fallback = httpPort, "80"
	}
	if port, ok := option.(int); ok {
		return strconv.Itoa(port)
	}
	return fallback
}

// checkSiteHosts refuses, for a URL-signing scheme without public_url, a route with no site host to
// hold the rebuilt URL to, and site_hosts entries that are no exact host.
func (h *Handler) checkSiteHosts() error {
	if !h.signsURL || h.PublicURL != "" {
		return nil
	}
	if len(h.SiteHosts) == 0 {
		return fmt.Errorf("the %s scheme signs the URL the provider called, and this site has no exact host name "+
			"to hold the request's Host to (a site address such as :8080, http:// or *.example.com takes any host): "+
			"set public_url to the URL the provider calls (in JSON config, site_hosts may list the site's host names instead)", h.scheme)
	}
	for _, entry := range h.SiteHosts {
		// The whole entry is checked: "https://host" splits into the name "https" and a port.
		name, port := splitHost(entry)
		if name == "" || strings.ContainsAny(entry, "*{}/@ ") || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("site_hosts entry %q: want an exact host name, with an optional :port", entry)
		}
	}
	return nil
}

// checkRequestHost refuses, before its body is read, a request whose URL would be rebuilt with a
// host the site does not list: its signature could be one made for another site's URL.
func (h *Handler) checkRequestHost(r *http.Request) error {
	if !h.signsURL || h.PublicURL != "" {
		return nil
	}
	_, host := requestOrigin(r)
	if h.siteHost(host) {
		return nil
	}
	return fmt.Errorf("the request's host %q is not one this site answers to (%s): the %s signature covers the URL called, "+
		"which is rebuilt only with the site's own host names", host, strings.Join(h.SiteHosts, ", "), h.scheme)
}

// siteHost reports whether host is one of SiteHosts: the same name in any case and, when both
// name a port, the same port. A host without a port is the provider's URL at its scheme's default
// port, as a proxy in front of the site serves it.
func (h *Handler) siteHost(host string) bool {
	name, port := splitHost(host)
	for _, entry := range h.SiteHosts {
		entryName, entryPort := splitHost(entry)
		if strings.EqualFold(name, entryName) && (port == "" || entryPort == "" || port == entryPort) {
			return true
		}
	}
	return false
}

// splitHost splits host[:port] (IPv6 in brackets when a port follows) into its name and port.
func splitHost(host string) (name, port string) {
	if name, port, err := net.SplitHostPort(host); err == nil {
		return name, port
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ""
}

// verify checks the signature, then, for a scheme whose timestamp is a field of the signed body
// rather than a header (Linear's webhookTimestamp), that field's freshness: the body is signed,
// so the field is too, and a captured request replayed later is refused as stale. A body the
// field cannot be read from as the app would is a *jsonpath.Refusal (internal/jsonpath).
func (h *Handler) verify(msg *verify.Message, doc *jsonpath.Body, now time.Time) (verify.Result, error) {
	defer h.timeVerify(now) // now is taken just before the call: the verification's start too
	verified, err := h.verifier.VerifyMessage(msg, now)
	if err != nil || h.timestampPath == nil {
		return verified, err
	}
	stamp, err := doc.Get(h.timestampPath)
	if err != nil && !errors.Is(err, jsonpath.ErrNotJSON) { // not JSON: the timestamp is missing
		return verify.Result{}, err
	}
	if err := h.verifier.CheckTimestamp(stamp.String(), now); err != nil {
		return verify.Result{}, err
	}
	return verified, nil
}

// provisionBodyTimestamp splits the scheme's body timestamp path, if it has one.
func (h *Handler) provisionBodyTimestamp() error {
	h.timestampPath = nil
	if text := h.verifier.Config().TimestampJSON; text != "" {
		path, err := jsonpath.Compile(text)
		if err != nil {
			return fmt.Errorf("timestamp_json: %w", err)
		}
		h.timestampPath = &path
	}
	return nil
}

// verifyStatus is the status of a request verify refused: 401, or 400 for a signed body whose
// timestamp field cannot be read as the app would.
func verifyStatus(err error) int {
	var refused *jsonpath.Refusal
	if errors.As(err, &refused) {
		return http.StatusBadRequest
	}
	return http.StatusUnauthorized
}
