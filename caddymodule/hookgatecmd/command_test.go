package hookgatecmd

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/verify"
)

// caddymodule's TestSignPrintsAcceptedCurlForEveryPreset sends what sign prints to a running
// gateway: every preset's request gets through, and tampered with, it is refused.

// TestSignDemoBodyCarriesTheID: each preset that reads its event ID from the body finds it in
// the demo body.
func TestSignDemoBodyCarriesTheID(t *testing.T) {
	for _, preset := range verify.PresetNames() {
		cfg, _ := verify.Preset(preset)
		if cfg.IDJSON == "" {
			continue
		}
		body, err := demoBody(cfg, false, `evt_"quoted"`, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := gjson.Get(body, cfg.IDJSON).String(); got != `evt_"quoted"` {
			t.Errorf("%s: %s in %s is %q", preset, cfg.IDJSON, body, got)
		}
	}
}

func TestSignNeedsPresetAndSecret(t *testing.T) {
	if _, err := signedCurl(signInput{preset: "nope", secret: "s", url: "u"}, time.Now()); err == nil || !strings.Contains(err.Error(), "--preset") {
		t.Fatalf("unknown preset: %v", err)
	}
	if _, err := signedCurl(signInput{preset: "github", url: "u"}, time.Now()); err == nil || !strings.Contains(err.Error(), "--secret") {
		t.Fatalf("no secret: %v", err)
	}
}
