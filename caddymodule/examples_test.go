package caddymodule

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/verify"
)

// exampleSecrets are what a user would export before running each example.
var exampleSecrets = map[string]string{
	"STANDARD_WEBHOOK_SECRET": testSecret,
	"SVIX_WEBHOOK_SECRET":     testSecret,
	"STRIPE_WEBHOOK_SECRET":   "whsec_test_secret",
	"GITHUB_WEBHOOK_SECRET":   "It's a Secret to Everybody",
	"SHOPIFY_WEBHOOK_SECRET":  "shpss_example",
	"SLACK_SIGNING_SECRET":    "8f742231b10e8888abcd99yyyzzz85a5",
	"TASK_WEBHOOK_SECRET":     "task-secret",
	"PLATFORM_WEBHOOK_SECRET": "platform-secret",

	"BOX_PRIMARY_KEY":              "box-primary-test-key",
	"CLERK_WEBHOOK_SIGNING_SECRET": testSecret,
	"ELEVENLABS_WEBHOOK_SECRET":    "elevenlabs-test-secret",
	"GOCARDLESS_WEBHOOK_SECRET":    "gocardless-test-secret",
	"HUBSPOT_CLIENT_SECRET":        "hubspot-test-client-secret",
	"INTERCOM_CLIENT_SECRET":       "intercom-test-client-secret",
	"LEMONSQUEEZY_WEBHOOK_SECRET":  "lemonsqueezy-test-secret",
	"LINE_CHANNEL_SECRET":          "line-test-channel-secret",
	"LINEAR_WEBHOOK_SECRET":        "lin_wh_test_secret",
	"MUX_WEBHOOK_SECRET":           "mux-test-secret",
	"OPENAI_WEBHOOK_SECRET":        testSecret,
	"PADDLE_WEBHOOK_SECRET":        "pdl_ntfset_test_secret",
	"RAZORPAY_WEBHOOK_SECRET":      "razorpay-test-secret",
	"RESEND_WEBHOOK_SECRET":        testSecret,
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
	files, _ := filepath.Glob("../examples/*.Caddyfile")
	for _, preset := range verify.PresetNames() {
		if !slices.Contains(files, "../examples/"+preset+".Caddyfile") && preset != "generic" { // generic: the seed_* files
			t.Errorf("no examples/%s.Caddyfile", preset)
		}
	}
	for name, value := range exampleSecrets {
		t.Setenv(name, value)
	}
	t.Setenv("HOOKGATE_ADMIN", "localhost:2999")
	t.Setenv("HOOKGATE_PORT", "9080")
	t.Setenv("HOOKGATE_UPSTREAM_PORT", "9081")
	t.Setenv("HOOKGATE_FORWARD_PORT", "9081")
	t.Setenv("XDG_DATA_HOME", filepath.Join(storageDir, "examples"))
	redis, err := redistest.Start(t.TempDir(), redistest.Durable...) // for redis_two_nodes.Caddyfile
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(redis.Stop)
	t.Setenv("HOOKGATE_REDIS_URL", "redis://"+redis.Addr)

	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tester := caddytest.NewTester(t)
			tester.InitServer(string(src), "caddyfile")

			req := tryRequest(t, string(src))
			first := doRequest(t, tester.Client, req)
			if strings.Contains(string(src), "forward ") {
				expectReply(t, "first (async)", first, http.StatusAccepted, `{"received":true,"id":"evt_`)
			} else {
				expectReply(t, "first", first, http.StatusOK, `"verified":"`)
			}
			expectReply(t, "again", doRequest(t, tester.Client, req), http.StatusOK, `"duplicate":true`)
		})
	}
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

func doRequest(t *testing.T, client *http.Client, req *http.Request) reply {
	t.Helper()
	req.Body, _ = req.GetBody()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("sending: %v", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return reply{status: resp.StatusCode, body: b.String(), header: resp.Header}
}
