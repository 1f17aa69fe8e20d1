package verify

import (
	"slices"
	"strings"
)

// standardWebhooks returns the Standard Webhooks scheme with its headers
// named headerPrefix+"id", "timestamp" and "signature".
func standardWebhooks(scheme, headerPrefix string) Config {
	return Config{
		Scheme:          scheme,
		SignatureHeader: headerPrefix + "signature",
		Format:          FormatStandard,
		Encoding:        EncodingBase64,
		Algorithm:       AlgorithmSHA256,
		SecretEncoding:  SecretWhsec,
		Signed:          "{id}.{timestamp}.{body}",
		TimestampHeader: headerPrefix + "timestamp",
		TimestampUnit:   UnitSeconds,
		IDHeader:        headerPrefix + "id",
		Tolerance:       DefaultTolerance,
	}
}

var presets = map[string]Config{
	"standard": standardWebhooks("standard", "webhook-"),
	"svix":     standardWebhooks("svix", "svix-"),
	"stripe": {
		Scheme:          "stripe",
		SignatureHeader: "Stripe-Signature",
		Format:          FormatStripe,
		Encoding:        EncodingHex,
		Algorithm:       AlgorithmSHA256,
		SecretEncoding:  SecretRaw, // the whole "whsec_..." string is the key
		Signed:          "{timestamp}.{body}",
		TimestampUnit:   UnitSeconds,
		IDJSON:          "id",
		Tolerance:       DefaultTolerance,
	},
	"github": {
		Scheme:          "github",
		SignatureHeader: "X-Hub-Signature-256",
		Format:          FormatSingle,
		Prefix:          "sha256=",
		Encoding:        EncodingHex,
		Algorithm:       AlgorithmSHA256,
		SecretEncoding:  SecretRaw,
		Signed:          "{body}",
		IDHeader:        "X-GitHub-Delivery",
	},
	"shopify": {
		Scheme:          "shopify",
		SignatureHeader: "X-Shopify-Hmac-Sha256",
		Format:          FormatSingle,
		Encoding:        EncodingBase64,
		Algorithm:       AlgorithmSHA256,
		SecretEncoding:  SecretRaw,
		Signed:          "{body}",
		IDHeader:        "X-Shopify-Webhook-Id",
	},
	"slack": {
		Scheme:          "slack",
		SignatureHeader: "X-Slack-Signature",
		Format:          FormatSingle,
		Prefix:          "v0=",
		Encoding:        EncodingHex,
		Algorithm:       AlgorithmSHA256,
		SecretEncoding:  SecretRaw,
		Signed:          "v0:{timestamp}:{body}",
		TimestampHeader: "X-Slack-Request-Timestamp",
		TimestampUnit:   UnitSeconds,
		IDJSON:          "event_id",
		Tolerance:       DefaultTolerance,
	},
	"generic": {Scheme: "generic"},
}

// Preset returns the Config of a known scheme by name (case-insensitive):
// "standard", "svix", "stripe", "github", "shopify", "slack" or "generic".
// The generic preset only names the scheme; its SignatureHeader must be set.
func Preset(name string) (Config, bool) {
	c, ok := presets[strings.ToLower(name)]
	return c, ok
}

// PresetNames returns the names Preset accepts, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for name := range presets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
