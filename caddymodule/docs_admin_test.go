package caddymodule

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// adminRefusals are the words of the admin API's answers to a request it has no endpoint for: a
// path outside its router, a method its endpoint does not take, a route that is not running.
var adminRefusals = []string{"use /hookgate/ui", "is not supported", "no async route named"}

// documentedAdminPaths are the `/hookgate/…` paths the README and docs show, without their
// queries, each with the pages that show it. A bare `/hookgate/` or `/hookgate/…` names them all
// and is left out, as is a path ending in `.` or `..`, which the docs show as what Go's mux
// redirects away.
func documentedAdminPaths(t *testing.T) map[string][]string {
	t.Helper()
	mention := regexp.MustCompile("/hookgate/[^\\s`'\"<>()\\[\\]?#,;]*")
	paths := map[string][]string{}
	for page, src := range docPages(t) {
		for _, path := range mention.FindAllString(src, -1) {
			if strings.HasSuffix(path, "/.") || strings.HasSuffix(path, "/..") {
				continue
			}
			path = strings.TrimRight(path, ".:") // the sentence's
			if path == "/hookgate/" || strings.HasSuffix(path, "/…") {
				continue
			}
			if !slices.Contains(paths[path], page) {
				paths[path] = append(paths[path], page)
			}
		}
	}
	return paths
}

// TestDocumentedAdminPathsAreServed requests every `/hookgate/…` path the README and docs show
// from a running Caddy with an async route, its words in capitals (ROUTE, ID, CURSOR) replaced
// by the route's name and made-up values, `a|b` as each of a and b, with the method the admin
// API serves it with (POST for replay): the admin API answers none of them as a path, method or
// route it does not serve. The dead-letter page's login link is served by `caddy hookgate ui`'s
// proxy instead, which is asked.
func TestDocumentedAdminPathsAreServed(t *testing.T) {
	paths := documentedAdminPaths(t)
	if len(paths) < 6 {
		t.Fatalf("only %d admin paths found in the docs (%v): is the pattern still right?", len(paths), paths)
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("docsadmin", unusedUpstream, asyncRoute(unusedUpstream)), "caddyfile")
	placeholder := regexp.MustCompile(`^[A-Z]+$`)
	link, err := url.Parse(startUIProxy(t))
	if err != nil {
		t.Fatal(err)
	}
	for path, pages := range paths {
		if path == link.Path {
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := noRedirect.Get(link.String())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther {
				t.Errorf("%v show %s: caddy hookgate ui's proxy answers its link %d %q", pages, path, resp.StatusCode, body)
			}
			continue
		}
		segments := strings.Split(strings.TrimPrefix(path, "/hookgate/"), "/")
		requests := []string{"/hookgate"}
		for i, segment := range segments {
			switch {
			case i == 1 && placeholder.MatchString(segment):
				segment = "docsadmin"
			case placeholder.MatchString(segment):
				segment = "no-such-" + strings.ToLower(segment)
			}
			var next []string
			for _, prefix := range requests {
				for _, alternative := range strings.Split(segment, "|") {
					next = append(next, prefix+"/"+alternative)
				}
			}
			requests = next
		}
		for _, target := range requests {
			method := http.MethodGet
			if strings.HasPrefix(target, "/hookgate/replay/") || strings.HasPrefix(target, "/hookgate/skip/") {
				method = http.MethodPost
			}
			req, err := http.NewRequest(method, "http://localhost:2999"+target, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tester.Client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, target, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			refused := resp.StatusCode >= 500
			for _, words := range adminRefusals {
				refused = refused || strings.Contains(string(body), words)
			}
			if refused {
				t.Errorf("%v show %s; the admin API answers %s %s with %d %s", pages, path, method, target, resp.StatusCode, body)
			} else {
				t.Logf("%s %s (%s): %d", method, target, path, resp.StatusCode)
			}
		}
	}
}
