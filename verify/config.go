package verify

import (
	"errors"
	"fmt"
	"time"
)

// Values accepted by the Config fields that name a choice.
const (
	FormatSingle   = "single"
	FormatStripe   = "stripe"
	FormatPaddle   = "paddle"
	FormatStandard = "standard"

	EncodingHex       = "hex"
	EncodingBase64    = "base64"
	EncodingBase64URL = "base64url" // URL-safe alphabet, no padding (Sanity)

	AlgorithmSHA1      = "sha1"
	AlgorithmSHA256    = "sha256"
	AlgorithmSHA512    = "sha512"
	AlgorithmEd25519   = "ed25519"    // a public-key signature: keys are public keys, not secrets
	AlgorithmECDSAP256 = "ecdsa-p256" // ECDSA on P-256 over the SHA-256 of the signed bytes, DER-encoded

	SecretRaw    = "raw"
	SecretBase64 = "base64"
	SecretWhsec  = "whsec"
	SecretHex    = "hex"

	UnitSeconds      = "s"
	UnitMilliseconds = "ms"
	UnitRFC3339      = "rfc3339"

	HandshakeSlack   = "slack"
	HandshakeZoom    = "zoom"
	HandshakeDiscord = "discord"
	HandshakeTwitch  = "twitch"
	HandshakeLine    = "line"
)

// The values each Config field that names a choice accepts, for callers that check a
// configuration as it is written.
var (
	Formats         = []string{FormatSingle, FormatStripe, FormatPaddle, FormatStandard}
	Encodings       = []string{EncodingHex, EncodingBase64, EncodingBase64URL}
	Algorithms      = []string{AlgorithmSHA256, AlgorithmSHA1, AlgorithmSHA512, AlgorithmEd25519, AlgorithmECDSAP256}
	SecretEncodings = []string{SecretRaw, SecretBase64, SecretHex, SecretWhsec}
	TimestampUnits  = []string{UnitSeconds, UnitMilliseconds, UnitRFC3339}
)

// DefaultTolerance is the freshness window used when Config.Tolerance is 0.
const DefaultTolerance = 5 * time.Minute

// Config describes one signature scheme. Presets are Configs with the
// fields filled in; any field can be overridden.
type Config struct {
	// Scheme is the name reported as Hookgate-Verified: a preset name or "generic".
	Scheme string
	// SignatureHeader is the header carrying the signature(s); several
	// headers, comma-separated, when the provider signs with each of its keys
	// in its own header (Box's primary and secondary).
	SignatureHeader string
	// Format is how the signature header is laid out:
	//   "single" (default): the value is Prefix + encoded signature; several header lines are allowed, any match wins.
	//   "stripe": "t=<timestamp>,v1=<sig>[,v1=<sig>...]"; only SignatureKey items count; the timestamp comes from t=.
	//   "paddle": "ts=<timestamp>;h1=<sig>[;h1=<sig>...]", the same with ";" and other names.
	//   "standard": a space-separated list of "v1,<base64>" (HMAC) and "v1a,<base64>" (Ed25519) entries.
	Format string
	// SignatureKey names the signature items of the stripe and paddle formats:
	// default "v1" (stripe) or "h1" (paddle); ElevenLabs uses "v0".
	SignatureKey string
	// Prefix precedes the encoded signature in the single format, e.g. "sha256=" or "v0=".
	Prefix string
	// Encoding of the signature in the header: "hex" (default), "base64", or
	// "base64url" (URL-safe, unpadded).
	Encoding string
	// Algorithm is "sha256" (default), "sha1" or "sha512" for an HMAC, or
	// "ed25519" or "ecdsa-p256" for a provider that signs with a private key
	// and publishes the public one.
	Algorithm string
	// SecretEncoding says how HMAC secrets are written: "raw" (default),
	// "base64", "hex", or "whsec" (an optional "whsec_" prefix, then standard base64).
	SecretEncoding string
	// Signed is the template of the signed bytes over {id}, {timestamp},
	// {body}, {method}, {url} (the URL the provider called) and {params}
	// (a form body's parameters, sorted, each name then value); default "{body}".
	Signed string
	// URLPortOptional says the provider may sign the URL without the port it
	// calls, or with the default port the URL omits; both are tried (Twilio).
	URLPortOptional bool
	// BodyHashParam is the query parameter of the signed URL that carries the
	// hex SHA-256 of a body the template does not sign (Twilio's "bodySHA256").
	BodyHashParam string
	// TimestampHeader is the header with the signed timestamp; "" when there is
	// none (the stripe and paddle formats carry it in the signature header).
	TimestampHeader string
	// TimestampUnit is "s" (default), "ms" or "rfc3339". The timestamp is
	// signed as it was sent.
	TimestampUnit string
	// TimestampJSON is the gjson path of a timestamp inside the signed body,
	// for a provider that signs no timestamp header (Linear's
	// webhookTimestamp). This package does not resolve it: callers pass its
	// value to Verifier.CheckTimestamp.
	TimestampJSON string
	// IDHeader is the header with the event id; "" if there is none or the id comes from JSON.
	IDHeader string
	// IDJSON is the gjson path of the event id in the body. This package does
	// not resolve it; it is carried for callers.
	IDJSON string
	// IDBodyDigest says the provider sends no event id, so callers use the
	// SHA-256 of the body instead: a retry carries the same body.
	IDBodyDigest bool
	// Tolerance is the largest accepted |now - timestamp|, in both directions; 0 means DefaultTolerance.
	Tolerance time.Duration
	// OtherSignatureHeaders are headers, comma-separated, in which the provider also signs, in a
	// form this scheme does not check (GitHub's SHA-1 X-Hub-Signature): not verified, but removed
	// with the signature header when what was verified is signed again for an app in its own
	// scheme.
	OtherSignatureHeaders string
	// Handshake names the provider's endpoint check that the receiver answers
	// itself (see Verifier.Handshake): "slack", "zoom", "discord", "twitch",
	// "line", or "" for none.
	Handshake string
}

// Validate fills in defaults (Scheme "generic", Format single, Encoding hex,
// Algorithm sha256, SecretEncoding raw, Signed "{body}", TimestampUnit s,
// Tolerance 5m, SignatureKey per format) and reports every configuration
// problem in words.
func (c *Config) Validate() error {
	c.fillDefaults()
	var problems []error
	report := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf(format, args...))
	}

	if !oneOf(c.Format, Formats...) {
		report("unknown format %q: use single, stripe, paddle or standard", c.Format)
	}
	if !oneOf(c.Encoding, Encodings...) {
		report("unknown encoding %q: use hex, base64 or base64url", c.Encoding)
	}
	if !oneOf(c.Algorithm, Algorithms...) {
		report("unknown algorithm %q: use sha256, sha1, sha512, ed25519 or ecdsa-p256", c.Algorithm)
	}
	if !oneOf(c.SecretEncoding, SecretEncodings...) {
		report("unknown secret encoding %q: use raw, base64, hex or whsec", c.SecretEncoding)
	}
	if !oneOf(c.TimestampUnit, TimestampUnits...) {
		report("unknown timestamp unit %q: use s, ms or rfc3339", c.TimestampUnit)
	}
	if !oneOf(c.Handshake, "", HandshakeSlack, HandshakeZoom, HandshakeDiscord, HandshakeTwitch, HandshakeLine) {
		report("unknown handshake %q: use slack, zoom, discord, twitch or line", c.Handshake)
	}
	if len(c.signatureHeaders()) == 0 {
		report("no signature header: set signature_header")
	}
	if c.Prefix != "" && c.Format != FormatSingle {
		report("a prefix only applies to the single format, not %q", c.Format)
	}
	if c.Tolerance < 0 {
		report("tolerance %v is negative", c.Tolerance)
	}
	if c.Format == FormatStandard && c.publicKeyScheme() {
		report("the standard format's v1 entries are HMACs, not %s: its v1a entries are verified with Ed25519 public keys whatever the algorithm", c.Algorithm)
	}
	c.validateTemplate(report)
	return errors.Join(problems...)
}

// validateTemplate checks that the signed template covers the body and has a source for every
// placeholder it uses.
func (c *Config) validateTemplate(report func(string, ...any)) {
	template, err := parseTemplate(c.Signed)
	if err != nil {
		report("%v", err)
		return
	}
	inHeader := c.timestampInSignatureHeader()
	if template.usesID && c.IDHeader == "" {
		report("the signed template %q uses {id} but no ID header is set (id header NAME)", c.Signed)
	}
	if template.usesTimestamp && c.TimestampHeader == "" && !inHeader {
		report("the signed template %q uses {timestamp} but there is no timestamp source: set timestamp_header", c.Signed)
	}
	if c.TimestampHeader != "" && !template.usesTimestamp {
		report("timestamp_header %q is set but the signed template %q has no {timestamp}: an unsigned timestamp proves nothing", c.TimestampHeader, c.Signed)
	}
	if c.TimestampJSON != "" && (c.TimestampHeader != "" || inHeader) {
		report("timestamp_json is set but the scheme already has a signed timestamp: use one source")
	}
	if c.TimestampHeader != "" && inHeader {
		report("the %s format takes its timestamp from the signature header, so timestamp_header must be empty", c.Format)
	}
	if inHeader && !template.usesTimestamp {
		report("the %s format needs {timestamp} in the signed template: an unsigned timestamp proves nothing", c.Format)
	}
	switch {
	case template.usesParams && c.BodyHashParam == "":
		report("the signed template %q uses {params} but no signed URL parameter carries the hash of a body that is not a form", c.Signed)
	case template.usesParams && !template.usesURL:
		report("the signed template %q uses {params} but not {url}, which carries %s", c.Signed, c.BodyHashParam)
	case !template.usesBody && !template.usesParams:
		report("the signed template %q lacks {body}", c.Signed)
	case c.BodyHashParam != "" && !template.usesParams:
		report("a body hash parameter is set but the signed template %q has no {params}", c.Signed)
	}
}

func (c *Config) fillDefaults() {
	setDefault(&c.Scheme, "generic")
	setDefault(&c.Format, FormatSingle)
	setDefault(&c.Encoding, EncodingHex)
	setDefault(&c.Algorithm, AlgorithmSHA256)
	setDefault(&c.SecretEncoding, SecretRaw)
	setDefault(&c.Signed, "{body}")
	setDefault(&c.TimestampUnit, UnitSeconds)
	switch c.Format {
	case FormatStripe:
		setDefault(&c.SignatureKey, "v1")
	case FormatPaddle:
		setDefault(&c.SignatureKey, "h1")
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
}

// timestampInSignatureHeader reports whether the format carries the timestamp in the signature header.
func (c *Config) timestampInSignatureHeader() bool {
	return c.Format == FormatStripe || c.Format == FormatPaddle
}

// hasTimestamp reports whether the scheme carries a signed timestamp.
// It is meaningful only on a validated Config.
func (c *Config) hasTimestamp() bool {
	return c.TimestampHeader != "" || c.timestampInSignatureHeader()
}

// publicKeyScheme reports whether the scheme's keys are public keys.
func (c *Config) publicKeyScheme() bool {
	return c.Algorithm == AlgorithmEd25519 || c.Algorithm == AlgorithmECDSAP256
}

// SignsBody reports whether the signed bytes hold the body byte for byte.
// {params} signs a form's parsed parameters instead, which bodies written
// differently (reordered, re-escaped) share.
func (c *Config) SignsBody() bool {
	template, err := parseTemplate(c.Signed)
	return err == nil && template.usesBody
}

// SignsURL reports whether the signed bytes include the method or the URL
// the provider called, so callers must supply them in Message.
func (c *Config) SignsURL() bool {
	template, err := parseTemplate(c.Signed)
	return err == nil && (template.usesURL || template.usesMethod)
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}

func oneOf(value string, choices ...string) bool {
	for _, choice := range choices {
		if value == choice {
			return true
		}
	}
	return false
}
