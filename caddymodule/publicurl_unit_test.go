package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The forwarded value that counts is the last one, and only a host; public_url "/" is no path.
func TestForwardedAndPublicURLEdges(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{[]string{"hooks.example.com"}, "hooks.example.com"},
		{[]string{"client.example.com, hooks.example.com"}, "hooks.example.com"},
		{[]string{"client.example.com", "hooks.example.com"}, "hooks.example.com"},
		{[]string{"evil.example.com/path"}, "fallback"},
		{[]string{"user@evil.example.com"}, "fallback"},
		{[]string{"hooks.example.com, "}, "fallback"},
		{nil, "fallback"},
	} {
		h := http.Header{"X-Forwarded-Host": tc.lines}
		if got := forwarded(h, "X-Forwarded-Host", "fallback"); got != tc.want {
			t.Errorf("forwarded(%q) = %q, want %q", tc.lines, got, tc.want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "http://internal:9080/hooks/square?x=1", nil)
	for public, want := range map[string]string{
		"https://hooks.example.com":        "https://hooks.example.com/hooks/square?x=1",
		"https://hooks.example.com/":       "https://hooks.example.com/hooks/square?x=1",
		"https://hooks.example.com/sq/in/": "https://hooks.example.com/sq/in/",
	} {
		h := &Handler{PublicURL: public}
		if got := h.publicURL(r, r.URL.RequestURI()); got != want {
			t.Errorf("public_url %s: %s, want %s", public, got, want)
		}
	}
}
