package verify

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// Verifier checks requests against one Config and its secrets. It is
// immutable after New and safe for concurrent use.
type Verifier struct {
	config   Config
	template signedTemplate
	keys     []*keyedMAC // one per secret, in the order given

	macSize      int
	encodedSize  int // length of one encoded MAC in the header
	signatureKey string
	timestampKey string
	idKey        string
}

// Result is what a successful verification learned about the request.
type Result struct {
	// ID is the value of IDHeader ("" if not configured or absent).
	ID string
	// Timestamp is the signed timestamp, zero if the scheme has none.
	Timestamp time.Time
	// rawTimestamp is the timestamp as signed, for SignedDigest.
	rawTimestamp string
}

// New validates a copy of c and decodes every secret per its SecretEncoding.
// Several secrets allow rotation: a signature made with any of them passes.
// Errors never include a secret.
func New(c Config, secrets []string) (*Verifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(secrets) == 0 {
		return nil, errors.New("no secret configured: at least one is needed")
	}
	template, err := parseTemplate(c.Signed)
	if err != nil {
		return nil, err
	}
	newHash, macSize := hashFor(c.Algorithm)
	v := &Verifier{
		config:       c,
		template:     template,
		macSize:      macSize,
		encodedSize:  encodedLen(c.Encoding, macSize),
		signatureKey: textproto.CanonicalMIMEHeaderKey(c.SignatureHeader),
		timestampKey: textproto.CanonicalMIMEHeaderKey(c.TimestampHeader),
		idKey:        textproto.CanonicalMIMEHeaderKey(c.IDHeader),
	}
	for i, secret := range secrets {
		key, err := decodeSecret(secret, c.SecretEncoding, i+1)
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, newKeyedMAC(newHash, key))
	}
	return v, nil
}

// Config returns the validated Config, defaults filled in.
func (v *Verifier) Config() Config { return v.config }

// Verify checks the signature over the raw body with every secret and every
// signature in the header, in constant time, then the freshness of the
// signed timestamp if the scheme has one. Failures are *Error, returned with
// a zero Result. A missing IDHeader value fails only when the id is signed.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Result, error) {
	var offered offeredHeaders
	if problem := v.readHeaders(h, &offered); problem != nil {
		return Result{}, problem
	}
	if problem := v.matchAny(&offered, body); problem != nil {
		return Result{}, problem
	}
	if v.config.hasTimestamp() {
		if problem := v.checkFreshness(offered.result.Timestamp, now); problem != nil {
			return Result{}, problem
		}
	}
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

// offeredHeaders is what a request's headers offer for verification, read
// without allocating.
type offeredHeaders struct {
	result  Result
	decoded [maxSignatures][maxMACSize]byte // the signatures that decode, of which valid
	valid   int
}

// readHeaders parses the signature, timestamp and id headers and decodes the
// offered signatures, reporting in the order Verify always has: the
// signature header, the timestamp, the id, then the signatures' encoding.
func (v *Verifier) readHeaders(h http.Header, offered *offeredHeaders) *Error {
	var signatures signatureList
	stripeTimestamp, problem := v.collectSignatures(h[v.signatureKey], &signatures)
	if problem != nil {
		return problem
	}
	result := &offered.result
	if v.config.hasTimestamp() {
		rawTimestamp := stripeTimestamp
		if v.config.Format != FormatStripe {
			rawTimestamp = first(h[v.timestampKey])
		}
		if rawTimestamp == "" {
			return failure(MissingTimestamp, "missing timestamp: "+v.timestampSource()+" is absent or empty")
		}
		timestamp, err := parseTimestamp(rawTimestamp, v.config.TimestampUnit)
		if err != nil {
			return failure(MalformedTimestamp, "malformed timestamp in "+v.timestampSource()+": "+err.Error())
		}
		result.Timestamp, result.rawTimestamp = timestamp, rawTimestamp
	}

	if v.config.IDHeader != "" {
		result.ID = first(h[v.idKey])
		if result.ID == "" && v.template.usesID {
			return failure(MissingID, "missing event id: header "+v.config.IDHeader+" is absent or empty")
		}
	}

	for _, signature := range signatures.all() {
		if v.decodeSignature(signature, &offered.decoded[offered.valid]) {
			offered.valid++
		}
	}
	if offered.valid == 0 {
		return failure(MalformedSignature, fmt.Sprintf("malformed signature in %s: expected %s of %d characters",
			v.config.SignatureHeader, v.config.Encoding, v.encodedSize))
	}
	return nil
}

// collectSignatures gathers the encoded signatures from the signature
// header lines and, for the stripe format, the t= timestamp.
func (v *Verifier) collectSignatures(lines []string, signatures *signatureList) (stripeTimestamp string, problem *Error) {
	header := v.config.SignatureHeader
	if len(lines) == 0 {
		return "", failure(MissingSignature, "missing signature: header "+header+" is absent")
	}
	withoutPrefix := 0
	for _, line := range lines {
		var err error
		switch v.config.Format {
		case FormatStripe:
			var timestamp string
			timestamp, err = parseStripe(line, signatures)
			if timestamp != "" && stripeTimestamp != "" && timestamp != stripeTimestamp {
				err = errors.New("its lines carry different t= values")
			}
			if timestamp != "" {
				stripeTimestamp = timestamp
			}
		case FormatStandard:
			err = parseStandard(line, signatures)
		default:
			encoded, ok := parseSingle(line, v.config.Prefix)
			switch {
			case !ok && strings.TrimSpace(line) != "":
				withoutPrefix++
			case ok && encoded != "":
				err = signatures.add(encoded)
			}
		}
		if err != nil {
			return "", failure(MalformedSignature, "malformed signature header "+header+": "+err.Error())
		}
	}
	if signatures.count == 0 {
		if withoutPrefix > 0 {
			return "", failure(MalformedSignature, fmt.Sprintf("malformed signature header %s: it does not start with %q", header, v.config.Prefix))
		}
		return "", failure(MissingSignature, "missing signature: header "+header+" carries no "+v.signatureKind())
	}
	return stripeTimestamp, nil
}

// matchAny compares each decoded signature, in constant time, with the MAC
// computed under every secret.
func (v *Verifier) matchAny(offered *offeredHeaders, body []byte) *Error {
	result := &offered.result
	matched := false
	for _, key := range v.keys {
		key.compute(&v.template, result.ID, result.rawTimestamp, body, func(mac []byte) {
			for i := range offered.valid {
				if hmac.Equal(mac, offered.decoded[i][:v.macSize]) {
					matched = true
				}
			}
		})
		if matched {
			return nil
		}
	}
	return failure(SignatureMismatch, "signature mismatch: no signature in "+v.config.SignatureHeader+" matches the request")
}

// maxEncodedSize is the longest encoded MAC accepted: sha512 in hex.
const maxEncodedSize = 2 * maxMACSize

// decodeSignature decodes one encoded MAC into the start of dst. It reports
// false if the text has the wrong length, alphabet or padding.
func (v *Verifier) decodeSignature(encoded string, dst *[maxMACSize]byte) bool {
	if len(encoded) != v.encodedSize {
		return false
	}
	var text [maxEncodedSize]byte // fixed buffers: decoding a string without allocating
	src := text[:copy(text[:], encoded)]
	// Text of the right length can still decode to more than macSize bytes
	// (unpadded base64: 88 characters are 66 bytes), so decode into a buffer
	// sized for the text, not for the MAC, then check the size.
	var decoded [maxEncodedSize]byte
	var n int
	var err error
	if v.config.Encoding == EncodingBase64 {
		n, err = base64.StdEncoding.Decode(decoded[:], src)
	} else {
		n, err = hex.Decode(decoded[:], src)
	}
	if err != nil || n != v.macSize {
		return false
	}
	copy(dst[:], decoded[:n])
	return true
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
	if v.config.Format == FormatStripe {
		return "the t= field of header " + v.config.SignatureHeader
	}
	return "header " + v.config.TimestampHeader
}

func (v *Verifier) signatureKind() string {
	switch v.config.Format {
	case FormatStripe:
		return "v1= signature"
	case FormatStandard:
		return "v1, signature"
	default:
		return "signature"
	}
}

func encodedLen(encoding string, macSize int) int {
	if encoding == EncodingBase64 {
		return base64.StdEncoding.EncodedLen(macSize)
	}
	return hex.EncodedLen(macSize)
}

func first(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}
