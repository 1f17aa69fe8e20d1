package verify

import (
	"fmt"
	"net/url"
	"strings"
)

// A provider that signs the URL it called (Twilio, Square, HubSpot) signed the public one; behind a
// proxy the gateway sees another, so the operator names the public one (a route's public_url) and
// Message.URL is rebuilt from it. The rule lives here so that the gateway, checking, and
// `caddy hookgate sign`, signing, rebuild the same URL.

// ParsePublicURL parses a public URL as an operator gives it: an absolute http or https URL.
func ParsePublicURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http or https URL", raw)
	}
	return u, nil
}

// PublicURL is the URL a request that arrived at requestURI (its path and query) was signed for,
// given the public URL: with no path (or just "/") and no query, public with requestURI appended;
// with one, or when it is no absolute http(s) URL, public as it is.
func PublicURL(public, requestURI string) string {
	if u, err := ParsePublicURL(public); err == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" {
		return strings.TrimSuffix(public, "/") + requestURI
	}
	return public
}
