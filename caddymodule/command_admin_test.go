package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The CLI never sends its POST again where a redirect points: Go's mux redirects a path with a
// "." segment to the cleaned path, which is about another thing (a route instead of an event).
func TestCLIDoesNotFollowARedirectWithItsPost(t *testing.T) {
	var followed atomic.Int32
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hookgate/replay/elsewhere" {
			followed.Add(1)
			writeJSON(w, map[string]any{"replayed": 4})
			return
		}
		http.Redirect(w, r, "/hookgate/replay/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(admin.Close)
	out, err := runHookgateCLIAt(admin.Listener.Addr().String(), "replay", "r", "evt_1")
	if err == nil || !strings.Contains(err.Error(), "redirected") || followed.Load() != 0 {
		t.Fatalf("a replay answered with a redirect: %q, %v, and %d requests where it pointed; want an error and none",
			out, err, followed.Load())
	}
}
