package verify

// Overrides are the fields of a scheme as an operator writes them beside a preset (a Caddyfile's
// subdirectives, a JSON config's fields, a CLI's flags): each one set replaces the preset's
// (Config.With), and every one set describes a scheme of one's own from `generic`.
type Overrides struct {
	// SignatureHeader is the header that carries the signature; several headers, comma-separated,
	// when the provider signs with each of its keys in its own header (box). Default: the
	// preset's.
	SignatureHeader string `json:"signature_header,omitempty"`
	// SignatureFormat is how that header is laid out: single, stripe, paddle or standard.
	// Default: the preset's, else single.
	SignatureFormat string `json:"signature_format,omitempty"`
	// SignatureKey names the signature items of the stripe and paddle formats. Default: the
	// preset's, else v1 (stripe) or h1 (paddle).
	SignatureKey string `json:"signature_key,omitempty"`
	// Prefix is the text before the encoded signature in the single format, e.g. `sha256=`.
	// Default: the preset's, else none.
	Prefix string `json:"prefix,omitempty"`
	// Encoding of the signature: hex, base64 or base64url (unpadded). Default: the preset's,
	// else hex.
	Encoding string `json:"encoding,omitempty"`
	// Algorithm of the signature: the HMAC hashes sha256, sha1 or sha512, or the public-key
	// signatures ed25519 or ecdsa-p256. Default: the preset's, else sha256.
	Algorithm string `json:"algorithm,omitempty"`
	// SecretEncoding is how secrets are written: raw, base64, hex or whsec. Default: the
	// preset's, else raw.
	SecretEncoding string `json:"secret_encoding,omitempty"`
	// Signed is the template of the signed bytes, over {id}, {timestamp}, {body}, {method}, {url}
	// (the URL the provider called) and {params} (a form body's parameters, sorted). Default: the
	// preset's, else {body}.
	Signed string `json:"signed,omitempty"`
	// TimestampHeader is the header carrying the signed timestamp. Default: the preset's, else
	// none.
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// TimestampUnit is the timestamp's unit: s, ms or rfc3339. Default: the preset's, else s.
	TimestampUnit string `json:"timestamp_unit,omitempty"`
}

// With is c with every field o sets in place of c's.
func (c Config) With(o Overrides) Config {
	for dst, src := range map[*string]string{
		&c.SignatureHeader: o.SignatureHeader,
		&c.Format:          o.SignatureFormat,
		&c.SignatureKey:    o.SignatureKey,
		&c.Prefix:          o.Prefix,
		&c.Encoding:        o.Encoding,
		&c.Algorithm:       o.Algorithm,
		&c.SecretEncoding:  o.SecretEncoding,
		&c.Signed:          o.Signed,
		&c.TimestampHeader: o.TimestampHeader,
		&c.TimestampUnit:   o.TimestampUnit,
	} {
		if src != "" {
			*dst = src
		}
	}
	return c
}
