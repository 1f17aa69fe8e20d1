package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// Twilio signs no timestamp: a request it signed for staging, sent to production behind a proxy
// that passes the client's X-Forwarded-Host on, must not verify there. The site's own host, in
// any case, still does.
func TestURLSigningRequestForAnotherSiteHostIsRefused(t *testing.T) {
	up := hooktest.NewUpstream(t)
	route := "sitehost_twilio"
	path := "/hooks/" + route
	tester := caddytest.NewTester(t)
	tester.InitServer(withTrustedProxies(presetGatewayConfig("twilio", route, up.Listener.Addr().String())), "caddyfile")
	form := func(n int) string { return fmt.Sprintf("CallSid=CAsitehost%d&From=%%2B14158675309", n) }
	viaProxy := func(host string, n int) hooktest.Reply {
		req := signRequest(t, "twilio", hooktest.Secret, fmt.Sprintf("sitehost-%d", n), "https://"+host+path, "application/x-www-form-urlencoded", form(n), nil)
		req.header.Set("X-Forwarded-Proto", "https")
		req.header.Set("X-Forwarded-Host", host)
		return sendSigned(t, tester.Client, req, "http://localhost:9080"+path)
	}
	hooktest.ExpectReply(t, "signed for staging, its host forwarded to production", viaProxy("staging.example.com", 1),
		http.StatusUnauthorized, `host \"staging.example.com\" is not one this site answers to`)
	hooktest.ExpectReply(t, "signed for the site's own host", viaProxy("hooks.example.com", 2), http.StatusOK, "upstream says hi")
	hooktest.ExpectReply(t, "the site's host in capitals", viaProxy("HOOKS.Example.com", 3), http.StatusOK, "upstream says hi")
	hooktest.ExpectReply(t, "the site's host on another port", viaProxy("hooks.example.com:8443", 4), http.StatusUnauthorized, "not one this site answers to")
	if n := up.Total(); n != 2 {
		t.Fatalf("the app got %d events, want the 2 for the site's own host", n)
	}
}

// A site that takes any host (no host name, a wildcard) gives a URL-signing route nothing to hold
// the request's Host to: the config is refused, saying to set public_url, and loads with it.
func TestURLSigningSiteWithoutHostNameNeedsPublicURL(t *testing.T) {
	for _, site := range []string{"http://:9080", "http://*.example.com:9080", "http://localhost:9080, :9080"} {
		for _, preset := range []string{"twilio", "square", "hubspot"} {
			t.Run(site+"/"+preset, func(t *testing.T) {
				cfg := strings.Replace(presetGatewayConfig(preset, "sitehost_any", unusedUpstream), "http://localhost:9080 {", site+" {", 1)
				err := validateCaddyfile(t, cfg)
				if err == nil || !strings.Contains(err.Error(), "has no exact host name") || !strings.Contains(err.Error(), "set public_url") {
					t.Fatalf("%s on a site %s without public_url: %v, want it refused, asking for public_url", preset, site, err)
				}
				withURL := strings.Replace(presetGatewayConfig(preset, "sitehost_any", unusedUpstream, "public_url https://hooks.example.com"),
					"http://localhost:9080 {", site+" {", 1)
				if err := validateCaddyfile(t, withURL); err != nil {
					t.Fatalf("%s on a site %s with public_url: %v", preset, site, err)
				}
			})
		}
	}
	named := strings.Replace(testSite, "bind 127.0.0.1\n", "bind 127.0.0.1\n\tinvoke twilio\n}\n", 1) +
		fmt.Sprintf("&(twilio) {\n\thookgate {\n\t\tpreset twilio\n\t\tsecret x\n\t\tstorage badger %s\n\t}\n}\n", storageDir)
	if err := validateCaddyfile(t, named); err == nil || !strings.Contains(err.Error(), "set public_url") {
		t.Fatalf("twilio in a named route, which runs in any site, without public_url: %v, want it refused", err)
	}
	cfg := strings.Replace(presetGatewayConfig("standard", "sitehost_hmac", unusedUpstream), "http://localhost:9080 {", "http://:9080 {", 1)
	if err := validateCaddyfile(t, cfg); err != nil {
		t.Fatalf("a scheme that does not sign the URL, on a site without a host name: %v", err)
	}
}

// In JSON config the site's hosts are site_hosts: empty, a URL-signing route needs public_url.
func TestURLSigningJSONWithoutSiteHostsNeedsPublicURL(t *testing.T) {
	expectProvisionRefused(t, Handler{Preset: "twilio", Secrets: []string{"x"}}, "set public_url")
	expectProvisionRefused(t, Handler{Preset: "square", Secrets: []string{"x"}, SiteHosts: []string{"*.example.com"}}, "want an exact host name")
}

// A site_hosts entry written as a URL, or with a port that is no number, names no host: it is
// refused when the config loads, not left to refuse every request (or to match a host "https").
func TestURLSigningJSONSiteHostsEntryThatIsNoHostIsRefused(t *testing.T) {
	for _, entry := range []string{"https://hooks.example.com", "hooks.example.com:https", "hooks.example.com:443/hooks"} {
		t.Run(entry, func(t *testing.T) {
			expectProvisionRefused(t, Handler{Preset: "twilio", Secrets: []string{"x"}, SiteHosts: []string{entry}}, "want an exact host name")
		})
	}
}

// The Caddyfile adapter fills site_hosts with the site's addresses, lower-cased, each with the port
// Caddy serves it on, also inside nested blocks; not with public_url, nor for a site taking any host.
func TestSiteHostsFromTheSiteAddresses(t *testing.T) {
	for name, tc := range map[string]struct {
		site, extra, want string
	}{
		"two addresses":      {"http://Hooks.Example.com:9080, http://localhost:9080", "", `"site_hosts":["hooks.example.com:9080","localhost:9080"]`},
		"https_port":         {"hooks.example.com", "", `"site_hosts":["hooks.example.com:9443"]`},
		"http_port":          {"http://hooks.example.com", "", `"site_hosts":["hooks.example.com:9080"]`},
		"with public_url":    {"http://localhost:9080", "public_url https://hooks.example.com", ""},
		"a wildcard address": {"http://*.example.com", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := strings.Replace(presetGatewayConfig("twilio", "sitehost_adapt", unusedUpstream, tc.extra), "http://localhost:9080 {\n\tbind 127.0.0.1\n", tc.site+" {\n\thandle {\n", 1)
			cfg = strings.TrimSuffix(cfg, "}\n") + "}\n}\n"
			adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(adapted), `"site_hosts"`); tc.want == "" && got || tc.want != "" && !strings.Contains(string(adapted), tc.want) {
				t.Fatalf("adapted JSON, want %q:\n%s", tc.want, adapted)
			}
		})
	}
}

// Host names compare in any case; ports when both name one; IPv6 in brackets.
func TestSiteHostMatching(t *testing.T) {
	h := &Handler{SiteHosts: []string{"hooks.example.com:443", "localhost:9080", "[::1]:9080"}}
	for host, want := range map[string]bool{
		"hooks.example.com":      true,
		"HOOKS.EXAMPLE.COM:443":  true,
		"hooks.example.com:8443": false,
		"staging.example.com":    false,
		"localhost:9080":         true,
		"localhost:9081":         false,
		"[::1]:9080":             true,
		"[::1]":                  true,
		"[::2]:9080":             false,
		"":                       false,
	} {
		if got := h.siteHost(host); got != want {
			t.Errorf("host %q: %v, want %v", host, got, want)
		}
	}
}
