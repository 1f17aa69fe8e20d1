package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
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

// Linear signs no timestamp header but puts webhookTimestamp (ms) in the signed body, and its
// library refuses one more than a minute off: so does the gateway, so a captured Linear request
// cannot be replayed once dedupe_ttl has forgotten its delivery ID.
func TestLinearBodyTimestampIsChecked(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	tester.InitServer(presetGatewayConfig("linear", "linear_ts", up.Listener.Addr().String()), "caddyfile")
	url := "http://localhost:9080/hooks/linear_ts"
	send := func(step, id string, body string, status int, reason string) {
		t.Helper()
		req := signRequest(t, "linear", hooktest.Secret, id, url, "application/json", body, nil)
		hooktest.ExpectReply(t, step, sendSigned(t, tester.Client, req, ""), status, reason)
	}
	now := time.Now()
	send("fresh", "lin-1", fmt.Sprintf(`{"action":"create","webhookTimestamp":%d}`, now.UnixMilli()), http.StatusOK, "upstream says hi")
	send("two minutes old", "lin-2", fmt.Sprintf(`{"action":"create","webhookTimestamp":%d}`, now.Add(-2*time.Minute).UnixMilli()),
		http.StatusUnauthorized, "stale timestamp")
	send("two minutes ahead", "lin-3", fmt.Sprintf(`{"action":"create","webhookTimestamp":%d}`, now.Add(2*time.Minute).UnixMilli()),
		http.StatusUnauthorized, "timestamp in the future")
	send("without the field", "lin-4", `{"action":"create"}`, http.StatusUnauthorized, "missing timestamp: JSON field webhookTimestamp")
	if got := len(up.Headers); got != 1 {
		t.Fatalf("the app got %d requests, want only the fresh one", got)
	}
}
