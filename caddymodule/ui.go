package caddymodule

import (
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The dead-letter page, GET /hookgate/ui on the admin API: one HTML file with its script and
// style inline, which reads GET /hookgate/routes and GET /hookgate/events/<route>?state=dead
// and replays with POST /hookgate/replay/...; it shows deliveries, never bodies or headers.
//
//go:embed ui/index.html
var uiPage []byte

// uiPolicy lets the page run only its own inline script and style and talk only to its own
// origin, and forbids framing it: the admin API admits navigations that carry no Origin (see
// docs/security.md), so a foreign page must not be able to frame it and steer a click on Replay.
var uiPolicy = fmt.Sprintf("default-src 'none'; script-src '%s'; style-src '%s'; connect-src 'self'; "+
	"img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	inlineHash(uiPage, "script"), inlineHash(uiPage, "style"))

// inlineHash is the CSP source of the page's first <tag> element's content.
func inlineHash(page []byte, tag string) string {
	open, closing := "<"+tag+">", "</"+tag+">"
	s := string(page)
	start := strings.Index(s, open)
	end := strings.Index(s, closing)
	if start < 0 || end < start {
		panic(fmt.Sprintf("hookgate: the embedded page has no %s element", open))
	}
	sum := sha256.Sum256([]byte(s[start+len(open) : end]))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

func (a *AdminAPI) serveUI(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return apiError(http.StatusMethodNotAllowed, fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path))
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", uiPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	_, err := w.Write(uiPage)
	return err
}

// routeSummary is one running async route for the page: its status and backlog, read from
// counters (no scan of the ledger).
type routeSummary struct {
	Name string `json:"name"`
	// Destination names the destination on a route that has several; absent for a route's only
	// one, which needs no naming.
	Destination string `json:"destination,omitempty"`
	routeStatus
	// Error says why the backlog could not be read (the ledger out of reach); the rest holds.
	Error string `json:"error,omitempty"`
}

// routes answers GET /hookgate/routes: every running async route, by name.
func (a *AdminAPI) routes(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return apiError(http.StatusMethodNotAllowed, fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path))
	}
	var senders []*pooledDeliverer
	deliverers.Range(func(_, v any) bool {
		senders = append(senders, v.(*pooledDeliverer))
		return true
	})
	destinations := map[string]int{}
	for _, sender := range senders {
		destinations[sender.key.name]++
	}
	summaries := make([]routeSummary, 0, len(senders))
	for _, sender := range senders {
		s := routeSummary{Name: sender.key.name, routeStatus: statusOf(r.Context(), sender)}
		if destinations[sender.key.name] > 1 {
			s.Destination = sender.key.destination
		}
		if s.err != nil {
			s.Error = fmt.Sprintf("reading the backlog: %v", s.err)
		}
		summaries = append(summaries, s)
	}
	slices.SortFunc(summaries, func(a, b routeSummary) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Destination, b.Destination))
	})
	return writeJSON(w, map[string]any{"routes": summaries})
}
