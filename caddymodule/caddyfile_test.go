package caddymodule

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/verify"
)

func TestUnmarshalCaddyfileEverySubdirective(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hookgate {
		preset           generic
		secret           {env.A}
		secret           {file./run/b}
		tolerance        3m
		name             tasks
		dedupe_ttl       96h
		lease            2m
		max_body         2MiB
		id               json data.event_id
		version          json data.task_id json data.version
		storage          badger /var/lib/hookgate
		signature_header X-Webhook-Signature
		signature_format single
		prefix           sha256=
		encoding         hex
		algorithm        sha256
		secret_encoding  raw
		signed           "{timestamp}.{body}"
		timestamp_header X-Webhook-Timestamp
		timestamp_unit   s
		monitor
	}`)
	var got Handler
	if err := got.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := Handler{
		Preset: "generic", Secrets: []string{"{env.A}", "{file./run/b}"},
		Tolerance: caddy.Duration(3 * time.Minute), Name: "tasks",
		DedupeTTL: caddy.Duration(96 * time.Hour), Lease: caddy.Duration(2 * time.Minute),
		MaxBody: 2 << 20,
		ID:      &Source{From: "json", Name: "data.event_id"},
		Version: &VersionSource{Entity: Source{From: "json", Name: "data.task_id"}, Version: Source{From: "json", Name: "data.version"}},
		Storage: &Storage{Backend: "badger", Dir: "/var/lib/hookgate"},
		Overrides: verify.Overrides{SignatureHeader: "X-Webhook-Signature", SignatureFormat: "single", Prefix: "sha256=",
			Encoding: "hex", Algorithm: "sha256", SecretEncoding: "raw", Signed: "{timestamp}.{body}",
			TimestampHeader: "X-Webhook-Timestamp", TimestampUnit: "s"},
		Monitor: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestUnmarshalCaddyfileDedupeOff(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hookgate {\n preset slack\n dedupe off\n}")); err != nil {
		t.Fatal(err)
	}
	if !h.DedupeOff {
		t.Fatal("dedupe off not set")
	}
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for input, wantErr := range map[string]string{
		"hookgate stripe":                     "wrong argument count",
		"hookgate {\n bogus 1\n}":             "unrecognized hookgate subdirective",
		"hookgate {\n tolerance soon\n}":      "tolerance",
		"hookgate {\n max_body lots\n}":       "max_body",
		"hookgate {\n dedupe on\n}":           "dedupe takes one argument: off",
		"hookgate {\n version json a\n}":      "version takes",
		"hookgate {\n preset\n}":              "wrong argument count",
		"hookgate {\n storage badger a b\n}":  "wrong argument count",
		"hookgate {\n id header\n}":           "id takes: header|json <name|path>, or body_sha256",
		"hookgate {\n secret a b\n}":          "wrong argument count",
		"hookgate {\n storage\n}":             "wrong argument count",
		"hookgate {\n version json a json\n}": "version takes",
		"hookgate {\n lease 1m 2m\n}":         "wrong argument count",
		"hookgate {\n id json a b\n}":         "id takes: header|json <name|path>, or body_sha256",
		"hookgate {\n dedupe\n}":              "dedupe takes one argument: off",
		"hookgate {\n monitor on\n}":          "wrong argument count",
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got error %v, want one containing %q", input, err, wantErr)
		}
	}
}

// A word from a closed set is checked as the Caddyfile is read: a typo is refused with the file
// and line it is on, and the word it most likely meant; another word, with the choices.
func TestCaddyfileClosedSetsRefusedWithFileLineAndAGuess(t *testing.T) {
	for input, wantErr := range map[string]string{
		"preset strpe":                              `unknown preset "strpe": did you mean "stripe"? (one of box, clerk,`,
		"preset mailgun":                            `unknown preset "mailgun": use one of box, clerk,`,
		"encoding base46":                           `unknown encoding "base46": did you mean "base64"? (one of hex, base64, base64url)`,
		"algorithm sha265":                          `unknown algorithm "sha265": did you mean "sha256"?`,
		"secret_encoding wsec":                      `unknown secret_encoding "wsec": did you mean "whsec"?`,
		"signature_format stripes":                  `unknown signature_format "stripes": did you mean "stripe"?`,
		"timestamp_unit sec":                        `unknown timestamp_unit "sec": use one of s, ms, rfc3339`,
		"id jsn data.id":                            `unknown id source "jsn": did you mean "json"?`,
		"version json a headr b":                    `unknown version source "headr": did you mean "header"?`,
		"storage bdger":                             `unknown storage backend "bdger": did you mean "badger"?`,
		"storage badger {\n min_fre 1GB\n }":        `unrecognized storage badger subdirective "min_fre": did you mean "min_free"?`,
		"storage redis redis://r {\n pasword x\n }": `unrecognized storage redis subdirective "pasword": did you mean "password"?`,
		"secrets abc":                               `unrecognized hookgate subdirective "secrets": did you mean "secret"?`,
		"dedup_ttl 1h":                              `unrecognized hookgate subdirective "dedup_ttl": did you mean "dedupe_ttl"?`,
		"frobnicate 1":                              `unrecognized hookgate subdirective "frobnicate" (one of algorithm, copy, dedupe,`,
		"forward http://a {\n jitter ful\n }":       `unknown jitter "ful": did you mean "full"?`,
		"forward http://a {\n max_atempts 3\n }":    `unrecognized forward subdirective "max_atempts": did you mean "max_attempts"?`,
	} {
		caddyfile := "example.com {\n\thookgate {\n\t\t" + input + "\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
		at := fmt.Sprintf("at Caddyfile:%d", 3+strings.Count(input, "{")) // the line of the word
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.HasSuffix(err.Error(), at) {
			t.Errorf("%q: got error %v, want one containing %q, %s", input, err, wantErr, at)
		}
	}
}

func TestProvisionErrorsAreClear(t *testing.T) {
	t.Setenv("HOOKGATE_UNIT_SECRET", "s3cr3t-value")
	for name, tc := range map[string]struct {
		h       Handler
		wantErr string
	}{
		"no preset":         {Handler{Secrets: []string{"x"}}, "preset is required"},
		"unknown preset":    {Handler{Preset: "paypal", Secrets: []string{"x"}}, `unknown preset "paypal"`},
		"no secret":         {Handler{Preset: "github"}, "no secret configured"},
		"unset env secret":  {Handler{Preset: "github", Secrets: []string{"{env.HOOKGATE_NOT_SET_ANYWHERE}"}}, "HOOKGATE_NOT_SET_ANYWHERE} is empty"},
		"no id source":      {Handler{Preset: "generic", Overrides: verify.Overrides{SignatureHeader: "X-Sig"}, Secrets: []string{"{env.HOOKGATE_UNIT_SECRET}"}}, "has no event ID"},
		"bad scheme field":  {Handler{Preset: "github", Overrides: verify.Overrides{Encoding: "rot13"}, Secrets: []string{"x"}}, "rot13"},
		"unknown backend":   {Handler{Preset: "github", Secrets: []string{"x"}, Storage: &Storage{Backend: "etcd"}}, "unknown storage backend"},
		"bad base64 secret": {Handler{Preset: "standard", Secrets: []string{"whsec_%%%"}}, "secret"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
			defer cancel()
			h := tc.h
			err := h.Provision(ctx)
			if err == nil {
				h.Cleanup()
				t.Fatalf("provisioned, want error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cr3t-value") || strings.Contains(err.Error(), "%%%") {
				t.Fatalf("error %q reveals the secret", err)
			}
		})
	}
}

// With several routes, a provision error names the one to fix: its name, or its preset when it
// has none; and says what is wrong once, without a package's prefix.
func TestProvisionErrorsNameTheRoute(t *testing.T) {
	site := func(routes string) string {
		return "{\n\tadmin off\n}\nhttp://localhost:9080 {\n" + routes + "\trespond 200\n}\n"
	}
	for name, tc := range map[string]struct{ routes, want string }{
		"named": {`	hookgate /hooks/stripe* {
		preset stripe
		secret whsec_c2VjcmV0
	}
	hookgate /hooks/billing* {
		preset stripe
		name billing
		secret {env.HOOKGATE_NOT_SET_ANYWHERE}
	}
`, `hookgate route "billing": secret #1: evaluated placeholder {env.HOOKGATE_NOT_SET_ANYWHERE} is empty`},
		"by its preset": {`	hookgate /hooks/github* {
		preset github
	}
`, `hookgate route "github": no secret configured`},
		"async": {`	hookgate /hooks/github* {
		preset github
		secret x
		monitor
		forward http://127.0.0.1:3000
	}
`, `hookgate route "github": monitor and forward cannot be used together`},
	} {
		err := validateCaddyfile(t, site(tc.routes))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error()[strings.Index(err.Error(), tc.want):], "hookgate: ") {
			t.Errorf("%s: %v, want an error containing %q, without a package's prefix", name, err, tc.want)
		}
	}
}

func TestUnmarshalCaddyfileForward(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hookgate {
		preset standard
		forward http://127.0.0.1:3000 {
			max_attempts    5
			timeout         10s
			workers         4
			rate            20/s
			backoff         1s 5s 1m
			jitter          full
			retry_after_cap 10m
			pause_after     3
			keep            12h
			dead_ttl        168h
			max_pending     2000
		}
	}`)
	var got Handler
	if err := got.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := &Forward{
		URL: "http://127.0.0.1:3000", MaxAttempts: 5, Timeout: caddy.Duration(10 * time.Second), Workers: 4, Rate: "20/s",
		Backoff: []caddy.Duration{caddy.Duration(time.Second), caddy.Duration(5 * time.Second), caddy.Duration(time.Minute)},
		Jitter:  "full", RetryAfterCap: caddy.Duration(10 * time.Minute), PauseAfter: 3,
		Keep: caddy.Duration(12 * time.Hour), DeadTTL: caddy.Duration(168 * time.Hour), MaxPending: 2000,
	}
	if !reflect.DeepEqual(got.Forward, want) {
		t.Fatalf("got  %+v\nwant %+v", got.Forward, want)
	}
	cfg, err := got.Forward.deliverConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Target.Host != "127.0.0.1:3000" || cfg.MaxAttempts != 5 || len(cfg.Schedule) != 3 || cfg.DeadKeep != 168*time.Hour || cfg.MaxPending != 2000 ||
		cfg.Rate != (deliver.Rate{Starts: 20, Per: time.Second}) {
		t.Fatalf("deliver config %+v", cfg)
	}

	for input, wantErr := range map[string]string{
		"hookgate {\n forward\n}":                              "forward takes: [name] <url>",
		"hookgate {\n forward http://x {\n workers many\n}\n}": "not a number",
		"hookgate {\n forward http://x {\n timeout soon\n}\n}": "timeout",
		"hookgate {\n forward http://x {\n backoff\n}\n}":      "wrong argument count",
		"hookgate {\n forward http://x {\n retries 3\n}\n}":    "unrecognized forward subdirective",
		"hookgate {\n forward http://x {\n rate\n}\n}":         "wrong argument count",
		"hookgate {\n forward http://x {\n rate 20/s 5\n}\n}":  "wrong argument count",
		"hookgate {\n forward http://x {\n rate 0/s\n}\n}":     `rate "0/s": want N/s or N/m`,
		"hookgate {\n forward http://x {\n rate -5/m\n}\n}":    `rate "-5/m": want N/s or N/m`,
		"hookgate {\n forward http://x {\n rate 20\n}\n}":      `rate "20": want N/s or N/m`,
		"hookgate {\n forward http://x {\n rate 20/h\n}\n}":    `rate "20/h": want N/s or N/m`,
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got error %v, want one containing %q", input, err, wantErr)
		}
	}
	if _, err := (&Forward{URL: "ftp://x"}).deliverConfig(); err == nil {
		t.Error("an ftp forward URL was accepted")
	}
	if _, err := (&Forward{URL: "http://x", Rate: "fast"}).deliverConfig(); err == nil || !strings.Contains(err.Error(), `rate "fast"`) {
		t.Errorf("a JSON rate of \"fast\": got error %v, want one naming the rate", err)
	}
}

// In a site block, hookgate runs after basic_auth and before reverse_proxy, whatever the order
// the lines are written in.
func TestDirectiveOrderAfterBasicAuth(t *testing.T) {
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(`http://localhost:9999 {
	reverse_proxy 127.0.0.1:3000
	hookgate {
		preset github
		secret x
	}
	basic_auth {
		ops $2a$14$Zkx19XLiW6VYouLHR5NmfOFU0z2GTNmpkT/5qqR7hx4IjWJPDhjvG
	}
}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	js := string(adapted)
	auth, gate, proxy := strings.Index(js, `"authentication"`), strings.Index(js, `"hookgate"`), strings.Index(js, `"reverse_proxy"`)
	if auth < 0 || !(auth < gate && gate < proxy) {
		t.Fatalf("handler order: authentication at %d, hookgate at %d, reverse_proxy at %d\n%s", auth, gate, proxy, js)
	}
}

// A preset is named in any letter case (verify.Preset lowers it), so `preset Stripe`, which
// loaded before the Caddyfile's closed sets were checked, still loads from a Caddyfile, as the
// same route does from JSON.
func TestCaddyfilePresetInAnyLetterCaseStillLoads(t *testing.T) {
	route := func(preset string) string {
		return "{\n\tadmin off\n}\nhttp://localhost:9080 {\n\thookgate /hooks/* {\n\t\tpreset " + preset +
			"\n\t\tsecret whsec_c2VjcmV0\n\t\tname preset_case\n\t\tstorage badger " + storageDir + "\n\t}\n\trespond 200\n}\n"
	}
	// The same route from JSON: "preset": "Stripe" provisions.
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(route("stripe")), nil)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON := strings.Replace(string(adapted), `"preset":"stripe"`, `"preset":"Stripe"`, 1)
	var cfg caddy.Config
	if err := json.Unmarshal([]byte(fromJSON), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf(`a JSON config with "preset": "Stripe": %v`, err)
	}
	if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(route("Stripe")), nil); err != nil {
		t.Errorf("a Caddyfile with `preset Stripe`, which its JSON loads: %v", err)
	}
}
