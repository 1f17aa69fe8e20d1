package caddymodule

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// curlArgs runs a printed curl command through a real shell, with curl replaced by a function
// that prints its arguments, so quoting is checked the way a user's shell will see it.
func curlArgs(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `curl() { for a in "$@"; do printf '%s\0' "$a"; done; }; `+line).Output()
	if err != nil {
		t.Fatalf("running %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// parseCurl turns curl arguments back into the request they describe.
func parseCurl(t *testing.T, args []string) (url string, hdr http.Header, body string) {
	hdr = http.Header{}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-sS":
		case "-X":
			i++
		case "-H":
			i++
			name, value, _ := strings.Cut(args[i], ": ")
			hdr.Add(name, value)
		case "--data-binary":
			i++
			body = args[i]
		default:
			url = args[i]
		}
	}
	return url, hdr, body
}

func TestSignPrintsAcceptedCurlForEveryPreset(t *testing.T) {
	secrets := map[string]string{"standard": testSecret, "svix": testSecret}
	for _, preset := range verify.PresetNames() {
		t.Run(preset, func(t *testing.T) {
			h := &Handler{Preset: preset}
			if preset == "generic" {
				h.SignatureHeader, h.Prefix, h.Signed, h.TimestampHeader = "X-Webhook-Signature", "sha256=", "{timestamp}.{body}", "X-Webhook-Timestamp"
				h.ID = &Source{From: "header", Name: "X-Webhook-Id"}
			}
			secret := secrets[preset]
			if secret == "" {
				secret = "it's a 'quoted' secret"
			}
			now := time.Now()
			line, err := signedCurl(h, secret, "http://localhost:8080/hooks/x?a=1&b=2", "", "", now)
			if err != nil {
				t.Fatal(err)
			}
			url, hdr, body := parseCurl(t, curlArgs(t, line))
			if url != "http://localhost:8080/hooks/x?a=1&b=2" {
				t.Fatalf("url %q", url)
			}
			cfg, _ := verify.Preset(preset)
			h.applyOverrides(&cfg)
			v, err := verify.New(cfg, []string{secret})
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.Verify(hdr, []byte(body), now)
			if err != nil {
				t.Fatalf("the printed request does not verify: %v\n%s", err, line)
			}
			if cfg.IDHeader != "" && !strings.HasPrefix(res.ID, "evt_") {
				t.Fatalf("event ID %q", res.ID)
			}
		})
	}
}

func TestSignNeedsPresetAndSecret(t *testing.T) {
	if _, err := signedCurl(&Handler{Preset: "nope"}, "s", "u", "", "", time.Now()); err == nil || !strings.Contains(err.Error(), "--preset") {
		t.Fatalf("unknown preset: %v", err)
	}
	if _, err := signedCurl(&Handler{Preset: "github"}, "", "u", "", "", time.Now()); err == nil || !strings.Contains(err.Error(), "--secret") {
		t.Fatalf("no secret: %v", err)
	}
}
