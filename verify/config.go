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
	FormatStandard = "standard"

	EncodingHex    = "hex"
	EncodingBase64 = "base64"

	AlgorithmSHA1   = "sha1"
	AlgorithmSHA256 = "sha256"
	AlgorithmSHA512 = "sha512"

	SecretRaw    = "raw"
	SecretBase64 = "base64"
	SecretWhsec  = "whsec"

	UnitSeconds      = "s"
	UnitMilliseconds = "ms"
)

// DefaultTolerance is the freshness window used when Config.Tolerance is 0.
const DefaultTolerance = 5 * time.Minute

// Config describes one HMAC signature scheme. Presets are Configs with the
// fields filled in; any field can be overridden.
type Config struct {
	// Scheme is the name reported as Hookgate-Verified: a preset name or "generic".
	Scheme string
	// SignatureHeader is the header carrying the signature(s).
	SignatureHeader string
	// Format is how the signature header is laid out:
	//   "single" (default): the value is Prefix + encoded MAC; several header lines are allowed, any match wins.
	//   "stripe": "t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]"; only v1 counts; the timestamp comes from t=.
	//   "standard": a space-separated list of "v1,<base64>"; other versions such as "v1a,..." are ignored.
	Format string
	// Prefix precedes the encoded MAC in the single format, e.g. "sha256=" or "v0=".
	Prefix string
	// Encoding of the MAC in the header: "hex" (default) or "base64".
	Encoding string
	// Algorithm is the HMAC hash: "sha256" (default), "sha1" or "sha512".
	Algorithm string
	// SecretEncoding says how secrets are written: "raw" (default), "base64",
	// or "whsec" (an optional "whsec_" prefix, then standard base64).
	SecretEncoding string
	// Signed is the template of the signed bytes over {id}, {timestamp} and {body}; default "{body}".
	Signed string
	// TimestampHeader is the header with the unix timestamp; "" when there is
	// none (the stripe format takes it from t=).
	TimestampHeader string
	// TimestampUnit is "s" (default) or "ms".
	TimestampUnit string
	// IDHeader is the header with the event id; "" if there is none or the id comes from JSON.
	IDHeader string
	// IDJSON is the gjson path of the event id in the body. This package does
	// not resolve it; it is carried for callers.
	IDJSON string
	// Tolerance is the largest accepted |now - timestamp|, in both directions; 0 means DefaultTolerance.
	Tolerance time.Duration
}

// Validate fills in defaults (Scheme "generic", Format single, Encoding hex,
// Algorithm sha256, SecretEncoding raw, Signed "{body}", TimestampUnit s,
// Tolerance 5m) and reports every configuration problem in words.
func (c *Config) Validate() error {
	c.fillDefaults()
	var problems []error
	report := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf(format, args...))
	}

	if !oneOf(c.Format, FormatSingle, FormatStripe, FormatStandard) {
		report("unknown format %q: use single, stripe or standard", c.Format)
	}
	if !oneOf(c.Encoding, EncodingHex, EncodingBase64) {
		report("unknown encoding %q: use hex or base64", c.Encoding)
	}
	if !oneOf(c.Algorithm, AlgorithmSHA256, AlgorithmSHA1, AlgorithmSHA512) {
		report("unknown algorithm %q: use sha256, sha1 or sha512", c.Algorithm)
	}
	if !oneOf(c.SecretEncoding, SecretRaw, SecretBase64, SecretWhsec) {
		report("unknown secret encoding %q: use raw, base64 or whsec", c.SecretEncoding)
	}
	if !oneOf(c.TimestampUnit, UnitSeconds, UnitMilliseconds) {
		report("unknown timestamp unit %q: use s or ms", c.TimestampUnit)
	}
	if c.SignatureHeader == "" {
		report("no signature header: set SignatureHeader")
	}
	if c.Prefix != "" && c.Format != FormatSingle {
		report("a prefix only applies to the single format, not %q", c.Format)
	}
	if c.Tolerance < 0 {
		report("tolerance %v is negative", c.Tolerance)
	}

	template, err := parseTemplate(c.Signed)
	if err != nil {
		problems = append(problems, err)
	}
	if template.usesID && c.IDHeader == "" {
		report("the signed template %q uses {id} but no IDHeader is set", c.Signed)
	}
	if template.usesTimestamp && c.TimestampHeader == "" && c.Format != FormatStripe {
		report("the signed template %q uses {timestamp} but there is no timestamp source: set TimestampHeader", c.Signed)
	}
	if c.TimestampHeader != "" && !template.usesTimestamp {
		report("TimestampHeader %q is set but the signed template %q has no {timestamp}: an unsigned timestamp proves nothing", c.TimestampHeader, c.Signed)
	}
	if c.TimestampHeader != "" && c.Format == FormatStripe {
		report("the stripe format takes its timestamp from t=, so TimestampHeader must be empty")
	}
	if c.Format == FormatStripe && !template.usesTimestamp {
		report("the stripe format needs {timestamp} in the signed template: an unsigned timestamp proves nothing")
	}
	if !template.usesBody {
		report("the signed template %q lacks {body}", c.Signed)
	}
	return errors.Join(problems...)
}

func (c *Config) fillDefaults() {
	setDefault(&c.Scheme, "generic")
	setDefault(&c.Format, FormatSingle)
	setDefault(&c.Encoding, EncodingHex)
	setDefault(&c.Algorithm, AlgorithmSHA256)
	setDefault(&c.SecretEncoding, SecretRaw)
	setDefault(&c.Signed, "{body}")
	setDefault(&c.TimestampUnit, UnitSeconds)
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
}

// hasTimestamp reports whether the scheme carries a signed timestamp.
// It is meaningful only on a validated Config.
func (c *Config) hasTimestamp() bool {
	return c.TimestampHeader != "" || c.Format == FormatStripe
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
