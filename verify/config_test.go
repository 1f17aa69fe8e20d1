package verify

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidateFillsDefaults(t *testing.T) {
	c := Config{SignatureHeader: "X-Signature"}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Config{
		Scheme: "generic", SignatureHeader: "X-Signature", Format: FormatSingle, Encoding: EncodingHex,
		Algorithm: AlgorithmSHA256, SecretEncoding: SecretRaw, Signed: "{body}", TimestampUnit: UnitSeconds,
		Tolerance: 5 * time.Minute,
	}
	if c != want {
		t.Fatalf("after Validate:\n got %+v\nwant %+v", c, want)
	}
}

func TestPresetsValidate(t *testing.T) {
	for _, name := range PresetNames() {
		c := mustPreset(t, name)
		if name == "generic" {
			c.SignatureHeader = "X-Signature"
		}
		if err := c.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
		if c.Scheme != name {
			t.Errorf("preset %s reports scheme %q", name, c.Scheme)
		}
	}
}

func TestPresetNames(t *testing.T) {
	want := []string{"box", "clerk", "discord", "elevenlabs", "generic", "github", "gocardless", "hubspot",
		"intercom", "lemonsqueezy", "line", "linear", "mux", "openai", "paddle", "razorpay", "resend", "sanity",
		"sendgrid", "shopify", "slack", "square", "standard", "stripe", "svix", "twilio", "twitch", "typeform",
		"workos", "zoom"}
	if got := PresetNames(); !slices.Equal(got, want) {
		t.Fatalf("PresetNames() = %v, want %v", got, want)
	}
	if _, ok := Preset("nope"); ok {
		t.Fatal(`Preset("nope") reported ok`)
	}
}

func TestValidateRejectsBadConfigs(t *testing.T) {
	base := Config{SignatureHeader: "X-Signature"}
	cases := []struct {
		name   string
		change func(*Config)
		want   string // words the error must contain
	}{
		{"unknown format", func(c *Config) { c.Format = "jwt" }, `unknown format "jwt"`},
		{"unknown encoding", func(c *Config) { c.Encoding = "base32" }, `unknown encoding "base32"`},
		{"unknown algorithm", func(c *Config) { c.Algorithm = "md5" }, `unknown algorithm "md5"`},
		{"unknown secret encoding", func(c *Config) { c.SecretEncoding = "rot13" }, `unknown secret encoding "rot13"`},
		{"unknown unit", func(c *Config) { c.TimestampUnit = "us" }, `unknown timestamp unit "us"`},
		{"no signature header", func(c *Config) { c.SignatureHeader = "" }, "no signature header"},
		{"id without header", func(c *Config) { c.Signed = "{id}.{body}" }, "uses {id} but no ID header"},
		{"timestamp without source", func(c *Config) { c.Signed = "{timestamp}.{body}" }, "no timestamp source"},
		{"unsigned timestamp", func(c *Config) { c.TimestampHeader = "X-Timestamp" }, "an unsigned timestamp proves nothing"},
		{"no body", func(c *Config) { c.Signed = "constant" }, "lacks {body}"},
		{"unknown placeholder", func(c *Config) { c.Signed = "{ts}.{body}" }, "unknown placeholder {ts}"},
		{"prefix outside single", func(c *Config) { c.Format = FormatStandard; c.Prefix = "v1," }, "prefix only applies"},
		{"negative tolerance", func(c *Config) { c.Tolerance = -time.Second }, "negative"},
		{"stripe with timestamp header", func(c *Config) {
			c.Format = FormatStripe
			c.Signed = "{timestamp}.{body}"
			c.TimestampHeader = "X-Timestamp"
		}, "timestamp_header must be empty"},
		{"stripe without signed timestamp", func(c *Config) { c.Format = FormatStripe }, "stripe format needs {timestamp}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.change(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate accepted %+v", c)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if _, err := New(c, []string{"secret"}); err == nil {
				t.Fatal("New accepted the invalid config")
			}
		})
	}
}

func TestTemplateBracesAreLiteral(t *testing.T) {
	c := Config{SignatureHeader: "X-Signature", Signed: `{"payload":{body}}`}
	if err := c.Validate(); err != nil {
		t.Fatalf("a JSON-like template with {body}: %v", err)
	}
	tmpl, _ := parseTemplate(c.Signed)
	if len(tmpl.segments) != 3 || string(tmpl.segments[0].literal) != `{"payload":` || tmpl.segments[1].kind != bodySegment {
		t.Fatalf("segments = %+v", tmpl.segments)
	}
}

func TestNewRejectsBadSecrets(t *testing.T) {
	standard := mustPreset(t, "standard")
	if _, err := New(standard, nil); err == nil {
		t.Error("New without secrets: want an error")
	}
	if _, err := New(standard, []string{""}); err == nil {
		t.Error("New with an empty secret: want an error")
	}
	base64Config := Config{SignatureHeader: "X-Sig", SecretEncoding: SecretBase64}
	if _, err := New(base64Config, []string{"a2V5"}); err != nil {
		t.Errorf("valid base64 secret: %v", err)
	}
	if _, err := New(standard, []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}); err != nil {
		t.Errorf("whsec secret without its optional prefix: %v", err)
	}
}
