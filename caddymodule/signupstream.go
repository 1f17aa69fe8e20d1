package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/net/http/httpguts"

	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/verify"
)

// An app that checks a signature itself checks it in its own scheme, with its own secret: the
// provider's (resign), hookgate's Standard Webhooks signature (sign_upstream SECRET), or a scheme
// of its own, often another provider's or an internal one (sign_upstream [PRESET] { … }). In the
// last form hookgate hands on what it verified signed as the app expects, at the time it is sent,
// and removes the provider's signature headers, which are not the app's to check.

// UpstreamScheme is how sign_upstream signs what hookgate hands on to the app. In JSON it is either
// a string, the Standard Webhooks secret of a signature of the gateway's own added beside the
// provider's (webhook-id, webhook-timestamp, webhook-signature), or an object: the scheme the
// app checks, in place of the provider's.
type UpstreamScheme struct {
	// Preset is the scheme the app checks, by a preset's name (stripe, standard, slack, …);
	// the fields below override it. Default: generic (the fields alone describe it).
	Preset string `json:"preset,omitempty"`
	// Secret is the app's own secret, in SecretEncoding (the preset's, or raw). `{env.*}` and
	// `{file.*}` placeholders are expanded once at provision time. Required.
	Secret string `json:"secret"`
	// The app's scheme's fields, laid over the preset's (verify.Overrides): the template takes
	// {id}, {timestamp}, {body} and {method}.
	verify.Overrides
	// IDHeader carries the event ID (Hookgate-Event-Id's value). Default: the preset's, else none.
	IDHeader string `json:"id_header,omitempty"`

	gateway bool // the string form: hookgate's own Standard Webhooks signature, beside the provider's
}

// gatewaySigning is the string form of sign_upstream: hookgate's own Standard Webhooks signature
// with secret.
func gatewaySigning(secret string) *UpstreamScheme {
	return &UpstreamScheme{Secret: secret, gateway: true}
}

// UnmarshalJSON takes the string form or the object form, whose fields are read as strictly as
// Caddy reads the rest of a config: a misspelt one is an error, not a default.
func (u *UpstreamScheme) UnmarshalJSON(b []byte) error {
	var secret string
	if err := json.Unmarshal(b, &secret); err == nil {
		*u = *gatewaySigning(secret)
		return nil
	}
	type fields UpstreamScheme
	*u = UpstreamScheme{}
	return caddy.StrictUnmarshalJSON(b, (*fields)(u))
}

// set reports whether sign_upstream asks for signing: the JSON string form "" asks for none.
func (u *UpstreamScheme) set() bool {
	return u != nil && (!u.gateway || u.Secret != "")
}

// MarshalJSON writes the form it was given in.
func (u UpstreamScheme) MarshalJSON() ([]byte, error) {
	if u.gateway {
		return json.Marshal(u.Secret)
	}
	type fields UpstreamScheme
	return json.Marshal(fields(u))
}

// unmarshalSignUpstream parses `sign_upstream <secret>` or `sign_upstream [<preset>] { … }`. Its
// errors never quote a word that may be a secret: a secret left before the block, or written
// alone on a line of it.
func unmarshalSignUpstream(d *caddyfile.Dispenser) (*UpstreamScheme, error) {
	args := d.RemainingArgs()
	nesting := d.Nesting()
	hasBlock := d.NextBlock(nesting)
	var preset string
	if len(args) == 1 && slices.Contains(verify.PresetNames(), strings.ToLower(args[0])) {
		preset = args[0]
	}
	switch {
	case !hasBlock && preset != "":
		return nil, d.Errf("sign_upstream %s: the app's scheme goes with its secret in a block: sign_upstream %s { secret … }", preset, preset)
	case !hasBlock && len(args) == 1:
		return gatewaySigning(args[0]), nil
	case !hasBlock:
		return nil, d.Err("sign_upstream takes a Standard Webhooks secret, or a block with the app's scheme: sign_upstream [<preset>] { secret … }")
	case len(args) == 1 && preset == "" && nearest(args[0], verify.PresetNames()) != "":
		return nil, d.Errf("the word before sign_upstream's block is not a preset's name: did you mean %s?", nearest(args[0], verify.PresetNames()))
	case len(args) > 1 || len(args) == 1 && preset == "":
		return nil, d.Err("sign_upstream takes at most a preset's name before its block; the app's secret goes on a `secret` line inside it")
	}
	u := &UpstreamScheme{Preset: preset}
	fields := map[string]*string{
		"secret": &u.Secret, "signature_header": &u.SignatureHeader, "signature_format": &u.SignatureFormat,
		"signature_key": &u.SignatureKey, "prefix": &u.Prefix, "encoding": &u.Encoding, "algorithm": &u.Algorithm,
		"secret_encoding": &u.SecretEncoding, "signed": &u.Signed, "timestamp_header": &u.TimestampHeader,
		"timestamp_unit": &u.TimestampUnit, "id_header": &u.IDHeader,
	}
	for ok := true; ok; ok = d.NextBlock(nesting) {
		sub := d.Val()
		dst, known := fields[sub]
		if !known {
			if guess := nearest(sub, slices.Sorted(maps.Keys(fields))); guess != "" {
				return nil, d.Errf("a line of sign_upstream's block is not one of its fields: did you mean %s?", guess)
			}
			return nil, d.Errf("a line of sign_upstream's block is not one of its fields (%s); the app's secret goes on a `secret` line",
				strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
		if !d.AllArgs(dst) {
			return nil, d.Errf("sign_upstream: %s takes one value", sub)
		}
		if allowed, ok := closedSets[sub]; ok {
			if err := checkChoice(d, sub, *dst, allowed); err != nil {
				return nil, err
			}
		}
	}
	if u.Secret == "" {
		return nil, d.Err("sign_upstream's block needs the app's secret: secret <secret>")
	}
	return u, nil
}

// appScheme is the scheme the app checks (the object form), validated for signing with key.
func (u *UpstreamScheme) appScheme(key string) (verify.Config, error) {
	cfg := verify.Config{Scheme: "generic"}
	if u.Preset != "" {
		preset, ok := verify.Preset(u.Preset)
		if !ok {
			return cfg, fmt.Errorf("unknown preset %q: use one of %s", u.Preset, strings.Join(verify.PresetNames(), ", "))
		}
		cfg = preset
	}
	cfg = cfg.With(u.Overrides)
	if u.IDHeader != "" {
		cfg.IDHeader = u.IDHeader
	}
	if cfg.TimestampJSON != "" {
		return cfg, fmt.Errorf("the app's %s scheme checks a timestamp inside the body (%s), which hookgate forwards unchanged", cfg.Scheme, cfg.TimestampJSON)
	}
	// Where the ID comes from and the provider's endpoint checks are the provider's business.
	cfg.Handshake, cfg.IDJSON, cfg.IDBodyDigest = "", "", false
	for _, name := range append(strings.Split(cfg.SignatureHeader, ","), cfg.TimestampHeader, cfg.IDHeader) {
		switch name = strings.TrimSpace(name); {
		case name == "":
		case !httpguts.ValidHeaderFieldName(name):
			return cfg, fmt.Errorf("the app's scheme names the header %q, which is not a valid header name (placeholders are expanded in secret only)", name)
		case deliver.OwnHeader(name):
			return cfg, fmt.Errorf("the app's scheme names the header %s: hookgate sets its own Hookgate-* headers itself", name)
		}
	}
	if cfg.SignsURL() || cfg.BodyHashParam != "" {
		return cfg, fmt.Errorf("the app's %s scheme signs the URL the app was called at, which the app derives from its own public address "+
			"and hookgate cannot know: sign_upstream takes schemes over {id}, {timestamp}, {body} and {method}", cfg.Scheme)
	}
	if cfg.Algorithm == verify.AlgorithmEd25519 || cfg.Algorithm == verify.AlgorithmECDSAP256 {
		return cfg, fmt.Errorf("the app's %s scheme is checked with a public key: only the holder of its private key can sign it", cfg.Scheme)
	}
	if _, err := verify.New(cfg, []string{key}); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// errResignWithAppScheme refuses resign beside sign_upstream in the app's scheme: the one signs
// in the provider's scheme, the other removes the provider's signature for the app's.
var errResignWithAppScheme = errors.New("forward resign signs in the provider's scheme, and sign_upstream with a scheme signs in the app's, " +
	"removing the provider's signature: use one")
