package verify

import (
	"slices"
	"strings"
	"time"
)

// Each preset is its provider's scheme as the provider's own library signs
// or checks it (see README, "Presets"); verify/oracle_test.go proves it
// against those libraries.

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

// timestampList returns a scheme whose header is "t=<ts>,v1=<hex>" over "{t}.{body}" (Stripe's).
func timestampList(scheme, header, unit, idJSON string) Config {
	return Config{
		Scheme:          scheme,
		SignatureHeader: header,
		Format:          FormatStripe,
		Encoding:        EncodingHex,
		Algorithm:       AlgorithmSHA256,
		SecretEncoding:  SecretRaw,
		Signed:          "{timestamp}.{body}",
		TimestampUnit:   unit,
		IDJSON:          idJSON,
		Tolerance:       DefaultTolerance,
	}
}

// bodyHMAC returns a scheme that signs the body alone, with no timestamp.
func bodyHMAC(scheme, header, prefix, encoding string) Config {
	return Config{
		Scheme:          scheme,
		SignatureHeader: header,
		Format:          FormatSingle,
		Prefix:          prefix,
		Encoding:        encoding,
		Algorithm:       AlgorithmSHA256,
		SecretEncoding:  SecretRaw,
		Signed:          "{body}",
	}
}

// with returns c after change, so a preset can say how it differs from its family.
func with(c Config, change func(*Config)) Config {
	change(&c)
	return c
}

var presets = map[string]Config{
	"standard": standardWebhooks("standard", "webhook-"),
	"svix":     standardWebhooks("svix", "svix-"),
	"resend":   standardWebhooks("resend", "svix-"),
	"clerk":    standardWebhooks("clerk", "svix-"),
	"openai":   standardWebhooks("openai", "webhook-"),

	"stripe": timestampList("stripe", "Stripe-Signature", UnitSeconds, "id"), // the whole "whsec_..." string is the key
	"mux":    timestampList("mux", "Mux-Signature", UnitSeconds, "id"),
	"workos": timestampList("workos", "WorkOS-Signature", UnitMilliseconds, "id"),
	"sanity": with(timestampList("sanity", "Sanity-Webhook-Signature", UnitMilliseconds, ""), func(c *Config) {
		c.Encoding = EncodingBase64URL
		c.IDHeader = "Idempotency-Key"
	}),
	"elevenlabs": with(timestampList("elevenlabs", "ElevenLabs-Signature", UnitSeconds, ""), func(c *Config) {
		c.SignatureKey = "v0"
		c.IDBodyDigest = true
		c.Tolerance = 30 * time.Minute // its library's window
	}),
	"paddle": with(timestampList("paddle", "Paddle-Signature", UnitSeconds, "event_id"), func(c *Config) {
		c.Format = FormatPaddle
		c.Signed = "{timestamp}:{body}"
	}),

	"github": with(bodyHMAC("github", "X-Hub-Signature-256", "sha256=", EncodingHex), func(c *Config) {
		c.IDHeader = "X-GitHub-Delivery"
		c.OtherSignatureHeaders = "X-Hub-Signature" // its legacy SHA-1
	}),
	"shopify": with(bodyHMAC("shopify", "X-Shopify-Hmac-Sha256", "", EncodingBase64), func(c *Config) {
		c.IDHeader = "X-Shopify-Webhook-Id"
	}),
	"linear": with(bodyHMAC("linear", "Linear-Signature", "", EncodingHex), func(c *Config) {
		c.IDHeader = "Linear-Delivery"
		c.TimestampJSON, c.TimestampUnit = "webhookTimestamp", UnitMilliseconds
		c.Tolerance = time.Minute // its library's window
	}),
	"razorpay": with(bodyHMAC("razorpay", "X-Razorpay-Signature", "", EncodingHex), func(c *Config) {
		c.IDHeader = "X-Razorpay-Event-Id"
	}),
	"line": with(bodyHMAC("line", "X-Line-Signature", "", EncodingBase64), func(c *Config) {
		c.IDJSON = "events.0.webhookEventId"
		c.Handshake = HandshakeLine
	}),
	"gocardless": with(bodyHMAC("gocardless", "Webhook-Signature", "", EncodingHex), func(c *Config) {
		c.IDJSON = "meta.webhook_id"
	}),
	"typeform": with(bodyHMAC("typeform", "Typeform-Signature", "sha256=", EncodingBase64), func(c *Config) {
		c.IDJSON = "event_id"
	}),
	"lemonsqueezy": with(bodyHMAC("lemonsqueezy", "X-Signature", "", EncodingHex), func(c *Config) {
		c.IDBodyDigest = true
	}),
	"intercom": with(bodyHMAC("intercom", "X-Hub-Signature", "sha1=", EncodingHex), func(c *Config) {
		c.Algorithm = AlgorithmSHA1
		c.IDJSON = "id"
	}),
	"square": with(bodyHMAC("square", "X-Square-Hmacsha256-Signature", "", EncodingBase64), func(c *Config) {
		c.OtherSignatureHeaders = "X-Square-Signature" // its legacy SHA-1
		c.Signed = "{url}{body}"
		c.IDJSON = "event_id"
	}),
	"twilio": with(bodyHMAC("twilio", "X-Twilio-Signature", "", EncodingBase64), func(c *Config) {
		c.Algorithm = AlgorithmSHA1
		c.Signed = "{url}{params}"
		c.BodyHashParam = "bodySHA256"
		c.URLPortOptional = true
		c.IDHeader = "I-Twilio-Idempotency-Token"
	}),

	"slack": {
		Scheme:          "slack",
		SignatureHeader: "X-Slack-Signature",
		Prefix:          "v0=",
		Signed:          "v0:{timestamp}:{body}",
		TimestampHeader: "X-Slack-Request-Timestamp",
		IDJSON:          "event_id",
		Handshake:       HandshakeSlack,
	},
	"zoom": {
		Scheme:          "zoom",
		SignatureHeader: "X-Zm-Signature",
		Prefix:          "v0=",
		Signed:          "v0:{timestamp}:{body}",
		TimestampHeader: "X-Zm-Request-Timestamp",
		IDBodyDigest:    true,
		Handshake:       HandshakeZoom,
	},
	"hubspot": {
		Scheme:          "hubspot",
		SignatureHeader: "X-HubSpot-Signature-v3",
		Encoding:        EncodingBase64,
		Signed:          "{method}{url}{body}{timestamp}",
		TimestampHeader: "X-HubSpot-Request-Timestamp",
		TimestampUnit:   UnitMilliseconds,
		IDJSON:          "0.eventId",
	},
	"twitch": {
		Scheme:          "twitch",
		SignatureHeader: "Twitch-Eventsub-Message-Signature",
		Prefix:          "sha256=",
		Signed:          "{id}{timestamp}{body}",
		TimestampHeader: "Twitch-Eventsub-Message-Timestamp",
		TimestampUnit:   UnitRFC3339,
		IDHeader:        "Twitch-Eventsub-Message-Id",
		Tolerance:       10 * time.Minute, // Twitch's documented window
		Handshake:       HandshakeTwitch,
	},
	"box": {
		Scheme:          "box",
		SignatureHeader: "Box-Signature-Primary, Box-Signature-Secondary",
		Encoding:        EncodingBase64,
		Signed:          "{body}{timestamp}",
		TimestampHeader: "Box-Delivery-Timestamp",
		TimestampUnit:   UnitRFC3339,
		IDHeader:        "Box-Delivery-Id",
		Tolerance:       10 * time.Minute, // its library's maximum age
	},
	"discord": {
		Scheme:          "discord",
		SignatureHeader: "X-Signature-Ed25519",
		Algorithm:       AlgorithmEd25519,
		Signed:          "{timestamp}{body}",
		TimestampHeader: "X-Signature-Timestamp",
		IDBodyDigest:    true, // interactions carry an "id", webhook events do not
		Handshake:       HandshakeDiscord,
	},
	"sendgrid": {
		Scheme:          "sendgrid",
		SignatureHeader: "X-Twilio-Email-Event-Webhook-Signature",
		Encoding:        EncodingBase64,
		Algorithm:       AlgorithmECDSAP256,
		Signed:          "{timestamp}{body}",
		TimestampHeader: "X-Twilio-Email-Event-Webhook-Timestamp",
		IDJSON:          "0.sg_event_id",
	},

	"generic": {Scheme: "generic"},
}

// Preset returns the Config of a known scheme by name (case-insensitive);
// PresetNames lists them. The generic preset only names the scheme; its
// SignatureHeader must be set.
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
