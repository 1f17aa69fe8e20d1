package caddymodule

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// startGatewayWithEmptyOrigin runs an async route under the admin settings the README gives for
// opening the dead-letter page: the empty origin listed beside the admin address.
func startGatewayWithEmptyOrigin(t *testing.T, route string) {
	t.Helper()
	cfg := gatewayConfig(route, unusedUpstream, asyncRoute(unusedUpstream))
	cfg = strings.Replace(cfg, "admin localhost:2999", "admin localhost:2999 {\n\t\torigins \"\" localhost:2999 127.0.0.1:2999\n\t}", 1)
	caddytest.NewTester(t).InitServer(cfg, "caddyfile")
}

// crossSiteGet is what a browser sends for a page on another site that holds a hidden
// <iframe referrerpolicy="no-referrer" src=url> (Caddy refuses no-cors fetches and images, not
// frame navigations): neither Origin nor Referer, Sec-Fetch-Mode: navigate, Sec-Fetch-Site:
// cross-site. The page cannot read the answer, but the admin API does the work.
func crossSiteGet(t *testing.T, path string) (int, string) {
	t.Helper()
	return adminWithHeaders(t, http.MethodGet, path, map[string]string{
		"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"})
}

// With the README's `origins ""`, any web page the operator visits can make the admin API list
// up to 1000 events of a route (each read with its payload from the ledger), as often as it
// likes: the empty origin is meant for an address typed into the browser (Sec-Fetch-Site: none),
// and hookgate's endpoints could refuse what a browser marks cross-site or same-site.
func TestAdminRefusesCrossSiteBrowserRequests(t *testing.T) {
	const route = "r12xsite"
	startGatewayWithEmptyOrigin(t, route)
	for _, path := range []string{
		"/hookgate/routes",
		"/hookgate/events/" + route + "?state=delivered&limit=1000",
		"/hookgate/status/" + route,
	} {
		if status, body := crossSiteGet(t, path); status != http.StatusForbidden {
			t.Errorf("a cross-site frame GET %s (no Origin, no Referer) was answered %d %.80s; want 403", path, status, body)
		}
	}
}
