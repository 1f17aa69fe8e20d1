package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// Verifier checks requests against one Config and its keys. It is
// immutable after New and safe for concurrent use.
type Verifier struct {
	config   Config
	template signedTemplate
	secrets  []secretKey // HMAC keys, in the order given
	ed25519  []ed25519.PublicKey
	ecdsa    []*ecdsa.PublicKey
	keyed    keyedList // the stripe and paddle formats' item names

	macSize         int
	encodedSize     int      // length of one encoded MAC in the header
	signatureKeys   []string // canonical header names
	timestampKey    string
	idKey           string
	signatureSource string // the signature header(s), for errors
}

// secretKey is one HMAC secret: a pool of keyed MACs, and the key for the
// handshakes that answer with a MAC of their own (Zoom).
type secretKey struct {
	mac *keyedMAC
	key []byte
}

// Result is what a successful verification learned about the request.
type Result struct {
	// ID is the value of IDHeader ("" if not configured or absent).
	ID string
	// Timestamp is the signed timestamp, zero if the scheme has none.
	Timestamp time.Time
	// fields are the signed values, for SignedDigest.
	fields signedFields
	// secret is the index of the secret that matched, -1 for a public key.
	secret int
	// verified is set by a successful verification only: Handshake answers nothing for a Result
	// that is not one, such as the zero value a failed Verify returns.
	verified bool
}

// Keys are what a Verifier checks signatures with.
type Keys struct {
	// Secrets are HMAC secrets, written in the Config's SecretEncoding.
	Secrets []string
	// PublicKeys verify the Ed25519 or ECDSA signatures of schemes whose
	// provider signs with a private key (and the standard format's v1a).
	PublicKeys []string
}

// New validates a copy of c and decodes every secret per its SecretEncoding.
// Several secrets allow rotation: a signature made with any of them passes.
// Errors never include a secret.
func New(c Config, secrets []string) (*Verifier, error) {
	return NewFromKeys(c, Keys{Secrets: secrets})
}

// NewFromKeys is New for schemes that verify with public keys too.
func NewFromKeys(c Config, keys Keys) (*Verifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	template, err := parseTemplate(c.Signed)
	if err != nil {
		return nil, err
	}
	newHash, macSize := hashFor(c.Algorithm)
	v := &Verifier{
		config:          c,
		template:        template,
		macSize:         macSize,
		encodedSize:     encodedLen(c.Encoding, macSize),
		timestampKey:    textproto.CanonicalMIMEHeaderKey(c.TimestampHeader),
		idKey:           textproto.CanonicalMIMEHeaderKey(c.IDHeader),
		keyed:           keyedList{separator: ",", timestampKey: "t", signatureKey: c.SignatureKey},
		signatureSource: strings.Join(c.signatureHeaders(), ", "),
	}
	if c.Format == FormatPaddle {
		v.keyed.separator, v.keyed.timestampKey = ";", "ts"
	}
	for _, name := range c.signatureHeaders() {
		v.signatureKeys = append(v.signatureKeys, textproto.CanonicalMIMEHeaderKey(name))
	}
	if err := v.addKeys(keys, newHash); err != nil {
		return nil, err
	}
	return v, nil
}

// Config returns the validated Config, defaults filled in.
func (v *Verifier) Config() Config { return v.config }

// Verify checks a request whose scheme signs neither its method nor its
// URL; see VerifyMessage.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Result, error) {
	return v.VerifyMessage(&Message{Header: h, Body: body}, now)
}

// VerifyMessage checks the signature over the raw body (and whatever else
// the scheme signs) with every key and every signature in the header, in
// constant time, then the freshness of the signed timestamp if the scheme
// has one. Failures are *Error, returned with a zero Result. A missing
// IDHeader value fails only when the id is signed.
func (v *Verifier) VerifyMessage(m *Message, now time.Time) (Result, error) {
	var offered offeredHeaders
	if problem := v.readHeaders(m.Header, &offered); problem != nil {
		return Result{}, problem
	}
	offered.result.fields.method, offered.result.fields.url = m.Method, m.URL
	if v.template.usesParams {
		form, problem := v.bodyParams(m)
		if problem != nil {
			return Result{}, problem
		}
		if form != nil {
			defer form.release()
			offered.result.fields.formBody, offered.result.fields.form = true, form
		}
	}
	problem := v.matchAny(&offered, m.Body)
	if problem != nil && v.config.URLPortOptional {
		// The provider may have signed the URL without the port it calls, or with the default
		// one it omits (Twilio drops the port of https URLs; its library tries both).
		if other, ok := portVariant(m.URL); ok {
			offered.result.fields.url = other
			problem = v.matchAny(&offered, m.Body)
		}
	}
	if problem != nil {
		return Result{}, problem
	}
	if v.config.hasTimestamp() {
		if problem := v.checkFreshness(offered.result.Timestamp, now); problem != nil {
			return Result{}, problem
		}
	}
	offered.result.fields.form = nil // released on return; SignedDigest parses the body again
	offered.result.verified = true
	return offered.result, nil
}

// CheckHeaders rejects, from the headers alone, a request that Verify could
// never accept whatever its body: no signature or one that does not parse or
// decode, a missing or malformed timestamp, one outside the tolerance, a
// missing signed id. It lets a caller refuse such a request before reading
// its body. A nil error promises nothing: only Verify checks the signature.
// Failures are *Error.
func (v *Verifier) CheckHeaders(h http.Header, now time.Time) error {
	var offered offeredHeaders
	if problem := v.readHeaders(h, &offered); problem != nil {
		return problem
	}
	if v.config.hasTimestamp() {
		if problem := v.checkFreshness(offered.result.Timestamp, now); problem != nil {
			return problem
		}
	}
	return nil
}

// readHeaders parses the signature, timestamp and id headers and decodes the
// offered signatures, reporting in the order Verify always has: the
// signature header, the timestamp, the id, then the signatures' encoding.
func (v *Verifier) readHeaders(h http.Header, offered *offeredHeaders) *Error {
	var signatures signatureList
	headerTimestamp, problem := v.collectSignatures(h, &signatures)
	if problem != nil {
		return problem
	}
	result := &offered.result
	if v.config.hasTimestamp() {
		rawTimestamp := headerTimestamp
		if !v.config.timestampInSignatureHeader() {
			rawTimestamp = first(h[v.timestampKey])
		}
		if rawTimestamp == "" {
			return failure(MissingTimestamp, "missing timestamp: "+v.timestampSource()+" is absent or empty")
		}
		timestamp, err := parseTimestamp(rawTimestamp, v.config.TimestampUnit)
		if err != nil {
			return failure(MalformedTimestamp, "malformed timestamp in "+v.timestampSource()+": "+err.Error())
		}
		result.Timestamp, result.fields.timestamp = timestamp, rawTimestamp
	}

	if v.config.IDHeader != "" {
		result.ID = first(h[v.idKey])
		if result.ID == "" && v.template.usesID {
			return failure(MissingID, "missing event id: header "+v.config.IDHeader+" is absent or empty")
		}
		result.fields.id = result.ID
	}

	asymmetric := 0
	for i := range signatures.count {
		if signatures.asymmetric[i] || v.config.publicKeyScheme() {
			if asymmetric == maxAsymmetricSignatures {
				continue
			}
			asymmetric++
		}
		if v.decodeSignature(signatures.encoded[i], signatures.asymmetric[i], offered) {
			offered.valid++
		}
	}
	if offered.valid == 0 {
		return failure(MalformedSignature, "malformed signature in "+v.signatureSource+": expected "+v.expectedSignature())
	}
	return nil
}

// collectSignatures gathers the encoded signatures from the signature
// header lines and, for the stripe and paddle formats, the timestamp.
func (v *Verifier) collectSignatures(h http.Header, signatures *signatureList) (headerTimestamp string, problem *Error) {
	present, withoutPrefix := false, 0
	for _, key := range v.signatureKeys {
		for _, line := range h[key] {
			present = true
			var err error
			switch v.config.Format {
			case FormatStripe, FormatPaddle:
				var timestamp string
				timestamp, err = parseKeyed(line, v.keyed, signatures)
				if timestamp != "" && headerTimestamp != "" && timestamp != headerTimestamp {
					err = errors.New("its lines carry different " + v.keyed.timestampKey + "= values")
				}
				if timestamp != "" {
					headerTimestamp = timestamp
				}
			case FormatStandard:
				err = parseStandard(line, len(v.secrets) > 0, len(v.ed25519) > 0, signatures)
			default:
				encoded, ok := parseSingle(line, v.config.Prefix)
				switch {
				case !ok && strings.TrimSpace(line) != "":
					withoutPrefix++
				case ok && encoded != "":
					err = signatures.add(encoded, false)
				}
			}
			if err != nil {
				return "", failure(MalformedSignature, "malformed signature header "+v.signatureSource+": "+err.Error())
			}
		}
	}
	if !present {
		return "", failure(MissingSignature, "missing signature: header "+v.signatureSource+" is absent")
	}
	if signatures.count == 0 {
		if withoutPrefix > 0 {
			return "", failure(MalformedSignature, fmt.Sprintf("malformed signature header %s: it does not start with %q", v.signatureSource, v.config.Prefix))
		}
		return "", failure(MissingSignature, "missing signature: header "+v.signatureSource+" carries no "+v.signatureKind())
	}
	return headerTimestamp, nil
}

// CheckTimestamp checks a timestamp the caller found in the signed body at
// Config.TimestampJSON: present, well-formed in the scheme's unit, and
// within the tolerance of now. Failures are *Error.
func (v *Verifier) CheckTimestamp(raw string, now time.Time) error {
	source := "JSON field " + v.config.TimestampJSON
	if raw == "" {
		return failure(MissingTimestamp, "missing timestamp: "+source+" is absent or empty")
	}
	timestamp, err := parseTimestamp(raw, v.config.TimestampUnit)
	if err != nil {
		return failure(MalformedTimestamp, "malformed timestamp in "+source+": "+err.Error())
	}
	if problem := v.checkFreshness(timestamp, now); problem != nil {
		return problem
	}
	return nil
}

func (v *Verifier) checkFreshness(timestamp, now time.Time) *Error {
	tolerance := v.config.Tolerance
	if age := now.Sub(timestamp); age > tolerance {
		return failure(StaleTimestamp, fmt.Sprintf("stale timestamp: signed %v ago, more than the %v allowed", age, tolerance))
	}
	if ahead := timestamp.Sub(now); ahead > tolerance {
		return failure(FutureTimestamp, fmt.Sprintf("timestamp in the future: signed %v ahead, more than the %v allowed", ahead, tolerance))
	}
	return nil
}

func (v *Verifier) timestampSource() string {
	if v.config.timestampInSignatureHeader() {
		return "the " + v.keyed.timestampKey + "= field of header " + v.signatureSource
	}
	return "header " + v.config.TimestampHeader
}

func (v *Verifier) signatureKind() string {
	switch v.config.Format {
	case FormatStripe, FormatPaddle:
		return v.config.SignatureKey + "= signature"
	case FormatStandard:
		var kinds []string
		if len(v.secrets) > 0 {
			kinds = append(kinds, "v1,")
		}
		if len(v.ed25519) > 0 {
			kinds = append(kinds, "v1a,")
		}
		return strings.Join(kinds, " or ") + " signature"
	default:
		return "signature"
	}
}

// signatureHeaders splits SignatureHeader into its header names.
func (c *Config) signatureHeaders() []string {
	var names []string
	for name := range strings.SplitSeq(c.SignatureHeader, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func first(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}
