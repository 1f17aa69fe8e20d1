package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/caddymodule/hookgatecmd"
)

// The page loads nothing from elsewhere and cannot be framed by another site: the admin API
// admits navigations without an Origin, so framing it could steer a click on Replay.
func TestDeadLetterPageIsSelfContainedAndUnframable(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := (&AdminAPI{}).serveUI(rec, httptest.NewRequest(http.MethodGet, "/hookgate/ui", nil)); err != nil {
		t.Fatal(err)
	}
	h := rec.Header()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'none'", "connect-src 'self'", "default-src 'none'", "script-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if h.Get("X-Frame-Options") != "DENY" || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Errorf("headers %v, want X-Frame-Options DENY and text/html", h)
	}
	page := rec.Body.String()
	if external := regexp.MustCompile(`(?i)(src|href)\s*=|https?://|@import|url\(`).FindString(page); external != "" {
		t.Errorf("the page refers to something outside itself: %q", external)
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Errorf("the page has %d script elements, want the one inline script its policy allows", n)
	}

	rec = httptest.NewRecorder()
	err := (&AdminAPI{}).serveUI(rec, httptest.NewRequest(http.MethodPost, "/hookgate/ui", nil))
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("POST /hookgate/ui: %v, want refused", err)
	}
}

// lineOf is a writer that hands over the first thing written to it: the link the ui command
// prints.
type lineOf chan string

func (l lineOf) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// startUIProxy runs `caddy hookgate ui` against the test's admin API until the test ends, and
// returns the one-time link it printed.
func startUIProxy(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	printed, done := make(lineOf, 1), make(chan error, 1)
	go func() { done <- hookgatecmd.Run(ctx, printed, "ui", "--address", "localhost:2999") }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the ui proxy: %v", err)
		}
	})
	select {
	case line := <-printed:
		link := strings.TrimSpace(line[strings.Index(line, "http://"):])
		t.Logf("caddy hookgate ui printed: %s", strings.TrimSpace(line))
		return link
	case err := <-done:
		t.Fatalf("the ui proxy did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the ui proxy printed no link")
	}
	return ""
}
