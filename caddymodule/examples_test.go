package caddymodule

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/verify"
)

// exampleSecrets are what a user would export before running each example.
var exampleSecrets = map[string]string{
	"STANDARD_WEBHOOK_SECRET": hooktest.Secret,
	"SVIX_WEBHOOK_SECRET":     hooktest.Secret,
	"STRIPE_WEBHOOK_SECRET":   "whsec_test_secret",
	"GITHUB_WEBHOOK_SECRET":   "It's a Secret to Everybody",
	"SHOPIFY_WEBHOOK_SECRET":  "shpss_example",
	"SLACK_SIGNING_SECRET":    "8f742231b10e8888abcd99yyyzzz85a5",
	"TASK_WEBHOOK_SECRET":     "task-secret",
	"PLATFORM_WEBHOOK_SECRET": "platform-secret",

	"BOX_PRIMARY_KEY":              "box-primary-test-key",
	"CLERK_WEBHOOK_SIGNING_SECRET": hooktest.Secret,
	"ELEVENLABS_WEBHOOK_SECRET":    "elevenlabs-test-secret",
	"GOCARDLESS_WEBHOOK_SECRET":    "gocardless-test-secret",
	"HUBSPOT_CLIENT_SECRET":        "hubspot-test-client-secret",
	"INTERCOM_CLIENT_SECRET":       "intercom-test-client-secret",
	"LEMONSQUEEZY_WEBHOOK_SECRET":  "lemonsqueezy-test-secret",
	"LINE_CHANNEL_SECRET":          "line-test-channel-secret",
	"LINEAR_WEBHOOK_SECRET":        "lin_wh_test_secret",
	"MUX_WEBHOOK_SECRET":           "mux-test-secret",
	"OPENAI_WEBHOOK_SECRET":        hooktest.Secret,
	"PADDLE_WEBHOOK_SECRET":        "pdl_ntfset_test_secret",
	"RAZORPAY_WEBHOOK_SECRET":      "razorpay-test-secret",
	"RESEND_WEBHOOK_SECRET":        hooktest.Secret,
	"SANITY_WEBHOOK_SECRET":        "sanity-test-secret",
	"SQUARE_SIGNATURE_KEY":         "square-test-signature-key",
	"TWILIO_AUTH_TOKEN":            "twilio-test-auth-token",
	"TWITCH_EVENTSUB_SECRET":       "twitch-test-secret",
	"TYPEFORM_WEBHOOK_SECRET":      "typeform-test-secret",
	"WORKOS_WEBHOOK_SECRET":        "workos-test-secret",
	"ZOOM_WEBHOOK_SECRET_TOKEN":    "zoom-test-secret-token",
}

// TestExamplesRunAsDocumented loads every examples/*.Caddyfile and runs its "# try:" line: the
// request `caddy hookgate sign` prints must get through once and then be a duplicate.
func TestExamplesRunAsDocumented(t *testing.T) {
	files := setExampleEnv(t)
	for _, preset := range verify.PresetNames() {
		if !slices.Contains(files, "../examples/"+preset+".Caddyfile") && preset != "generic" { // generic: the seed_* files
			t.Errorf("no examples/%s.Caddyfile", preset)
		}
	}
	t.Setenv("HOOKGATE_UPSTREAM_PORT", "9081")
	t.Setenv("HOOKGATE_FORWARD_PORT", "9081")

	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tester := caddytest.NewTester(t)
			tester.InitServer(string(src), "caddyfile")

			req := tryRequest(t, string(src))
			first := hooktest.DoRequest(t, tester.Client, req)
			if strings.Contains(string(src), "forward ") {
				hooktest.ExpectReply(t, "first (async)", first, http.StatusAccepted, `{"received":true,"id":"evt_`)
			} else {
				hooktest.ExpectReply(t, "first", first, http.StatusOK, `"verified":"`)
			}
			hooktest.ExpectReply(t, "again", hooktest.DoRequest(t, tester.Client, req), http.StatusOK, `"duplicate":true`)
		})
	}
}

// setExampleEnv exports what a user would before running the examples (their secrets, the ports
// and, for redis_two_nodes.Caddyfile, a Redis) and returns the examples' files.
func setExampleEnv(t *testing.T) []string {
	t.Helper()
	for name, value := range exampleSecrets {
		t.Setenv(name, value)
	}
	t.Setenv("HOOKGATE_ADMIN", "localhost:2999")
	t.Setenv("HOOKGATE_PORT", "9080")
	t.Setenv("XDG_DATA_HOME", filepath.Join(storageDir, "examples"))
	redis, err := redistest.Start(t.TempDir(), redistest.Durable...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(redis.Stop)
	t.Setenv("HOOKGATE_REDIS_URL", "redis://"+redis.Addr)
	files, _ := filepath.Glob("../examples/*.Caddyfile")
	return files
}

// tryRequest runs the example's "# try:" line: the shell expands its arguments, the sign command
// prints a curl command, and that is turned back into a request.
func tryRequest(t *testing.T, caddyfile string) *http.Request {
	t.Helper()
	const marker = "# try: ./caddy hookgate sign "
	start := strings.Index(caddyfile, marker)
	end := strings.Index(caddyfile, " | sh\n")
	if start < 0 || end < start {
		t.Fatal(`no "# try: ./caddy hookgate sign … | sh" line`)
	}
	line := caddyfile[start+len(marker) : end]
	out, err := exec.Command("sh", "-c", `args() { printf '%s\0' "$@"; }; args `+line).Output()
	if err != nil {
		t.Fatalf("expanding %q: %v", line, err)
	}
	return printedRequest(t, strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")...)
}

// TestExamplesNeverHandForgedHookgateHeadersToTheApp loads the root Caddyfile and every example as
// documented, with an app that records what reaches it in place of their stand-in one, and sends
// forged Hookgate-* headers (names in other cases, and with `_` for `-`, which Rack, CGI, PHP and
// Django read as the same header) on the route's path with `/`, `.json`, `;x` or `%2F` appended,
// in other cases, on other paths, and beside a genuine signed request: the app never sees a forged
// value, and still gets hookgate's own headers with the genuine event.
func TestExamplesNeverHandForgedHookgateHeadersToTheApp(t *testing.T) {
	files := append(setExampleEnv(t), "../Caddyfile")
	t.Setenv("HOOKGATE_SECRET", hooktest.Secret) // the root Caddyfile's
	// Ledgers of their own, so the task callback's version 1 is new; not t.TempDir(), removed while
	// the last config loaded still has its ledger open.
	data, err := os.MkdirTemp(storageDir, "examples-forged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_DATA_HOME", data)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			app := hooktest.NewUpstream(t)
			port := strconv.Itoa(app.Listener.Addr().(*net.TCPAddr).Port)
			t.Setenv("HOOKGATE_UPSTREAM_PORT", port)
			t.Setenv("HOOKGATE_FORWARD_PORT", port)
			tester := caddytest.NewTester(t)
			tester.InitServer(withoutStandIn(t, string(src)), "caddyfile")

			genuine := genuineRequest(t, string(src))
			forgeHookgateHeaders(genuine.Header, "beside a genuine event")
			if got := hooktest.DoRequest(t, tester.Client, genuine); got.Status >= 300 {
				t.Fatalf("the genuine request: got %d %q", got.Status, got.Body)
			}
			under, outside := pathsAround(t, string(src))
			for _, path := range append(under, outside...) {
				req, err := http.NewRequest(http.MethodPost, "http://localhost:9080"+path, strings.NewReader(`{"id":"evt_forged"}`))
				if err != nil {
					t.Fatal(err)
				}
				forgeHookgateHeaders(req.Header, "on "+path)
				got := hooktest.DoRequest(t, tester.Client, req)
				if slices.Contains(under, path) && (got.Status != http.StatusUnauthorized || !strings.Contains(got.Body, `"received":false`)) {
					t.Errorf("%s, under the route's path, got %d %q; want hookgate's 401", path, got.Status, got.Body)
				}
			}

			seen := func() []http.Header {
				app.Mu.Lock()
				defer app.Mu.Unlock()
				return slices.Clone(app.Headers)
			}
			hooktest.WaitFor(t, "the genuine event to reach the app (async examples deliver it later)", 10*time.Second, func() bool {
				return slices.ContainsFunc(seen(), func(h http.Header) bool {
					v := h.Get("Hookgate-Verified")
					return v != "" && !strings.Contains(v, "forged")
				})
			})
			for _, header := range seen() {
				var forged []string
				for name, values := range header {
					folded := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name))
					for _, v := range values {
						if strings.HasPrefix(folded, "hookgate-") && strings.Contains(v, "forged") {
							forged = append(forged, name+": "+v)
						}
					}
				}
				if len(forged) > 0 {
					slices.Sort(forged)
					t.Errorf("the app got %s", strings.Join(forged, ", "))
				}
			}
		})
	}
}

// withoutStandIn is a Caddyfile without its stand-in app's site, so that the test's app, on that
// port, is the one that receives what gets through.
func withoutStandIn(t *testing.T, caddyfile string) string {
	t.Helper()
	gateway, _, found := strings.Cut(caddyfile, "http://localhost:{$HOOKGATE_UPSTREAM_PORT:3000} {")
	if !found {
		t.Fatal("no stand-in app's site on {$HOOKGATE_UPSTREAM_PORT:3000}")
	}
	return gateway
}

// genuineRequest is the example's "# try:" request, or for the root Caddyfile the README's
// `caddy hookgate sign --preset standard --secret "$HOOKGATE_SECRET"` sent to the test's port.
func genuineRequest(t *testing.T, caddyfile string) *http.Request {
	t.Helper()
	if strings.Contains(caddyfile, "# try: ") {
		return tryRequest(t, caddyfile)
	}
	return printedRequest(t, "--preset", "standard", "--secret", hooktest.Secret, "--url", "http://localhost:9080/hooks/demo")
}

// forgeHookgateHeaders sets hookgate's headers, and names an app may read as theirs, to a forged
// value saying where it was sent.
func forgeHookgateHeaders(header http.Header, where string) {
	for _, name := range []string{"Hookgate-Verified", "Hookgate-Event-Id", "hookgate-attempt", "HOOKGATE-SIGNED-URL",
		"Hookgate_Verified", "hookgate_event_id", "HOOKGATE_VERIFIED", "Hookgate.Verified"} {
		header[name] = []string{"forged " + where}
	}
}

// pathsAround are, for each hookgate route of the Caddyfile, its path (a `*` route: one path
// under it) with a suffix or in another case, which the route must take, and paths outside every
// route.
func pathsAround(t *testing.T, caddyfile string) (under, outside []string) {
	t.Helper()
	routes := regexp.MustCompile(`(?m)^\s*hookgate (/\S*) \{`).FindAllStringSubmatch(caddyfile, -1)
	if len(routes) == 0 {
		t.Fatal("no `hookgate /PATH {` route")
	}
	for _, route := range routes {
		base := strings.TrimSuffix(route[1], "*")
		if strings.HasSuffix(base, "/") {
			base += "demo"
		}
		half := len(base) / 2
		under = append(under, base, base+"/", base+"/x", base+".json", base+";x", base+"%2F", base+"%2Fx",
			strings.ToUpper(base), strings.ToUpper(base[:half])+base[half:])
	}
	return under, []string{"/", "/other", "/hooks"}
}
