package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
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
