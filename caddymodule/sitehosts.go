package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

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
