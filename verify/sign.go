package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sign returns the headers a provider would send for body under scheme c:
// the signature header, the timestamp header if any and the id header if
// any. secret is written in c.SecretEncoding. ts is ignored when the scheme
// has no timestamp. It serves the CLI signer, tests and load generators.
func Sign(c Config, secret string, id string, ts time.Time, body []byte) (http.Header, error) {
	m := &Message{Body: body}
	if err := SignMessage(c, secret, id, ts, m); err != nil {
		return nil, err
	}
	return m.Header, nil
}

// SignMessage adds to m.Header the headers a provider would send for m under
// scheme c. key is the HMAC secret or, for a public-key scheme, the private
// key; in the standard format a "whsk_" key signs a v1a entry. When the
// scheme has a BodyHashParam and the body is not a form, the body's hash is
// appended to m.URL, as Twilio does.
func SignMessage(c Config, key, id string, ts time.Time, m *Message) error {
	if err := c.Validate(); err != nil {
		return err
	}
	template, err := parseTemplate(c.Signed)
	if err != nil {
		return err
	}
	if template.usesID && id == "" {
		return errors.New("an event id is needed: the signed template uses {id}")
	}
	if m.Header == nil {
		m.Header = http.Header{}
	}
	fields := signedFields{id: id, method: m.Method}
	if c.hasTimestamp() {
		if ts.Before(time.Unix(0, 0)) {
			return errors.New("the timestamp must not be before 1970: receivers read it as an unsigned unix time")
		}
		fields.timestamp = formatTimestamp(ts, c.TimestampUnit)
		if c.TimestampHeader != "" {
			m.Header.Set(c.TimestampHeader, fields.timestamp)
		}
	}
	if c.IDHeader != "" && id != "" {
		m.Header.Set(c.IDHeader, id)
	}
	if template.usesParams {
		if fields.formBody, err = signedParams(&c, m); err != nil {
			return err
		}
	}
	fields.url = m.URL

	var message bytes.Buffer
	var scratch [256]byte
	template.writeTo(&message, scratch[:], &fields, m.Body)
	signature, v1a, err := signBytes(&c, key, message.Bytes())
	if err != nil {
		return err
	}
	encoded := encodeSignature(c.Encoding, signature, v1a)
	header := c.signatureHeaders()[0]
	switch {
	case c.Format == FormatStripe:
		m.Header.Set(header, "t="+fields.timestamp+","+c.SignatureKey+"="+encoded)
	case c.Format == FormatPaddle:
		m.Header.Set(header, "ts="+fields.timestamp+";"+c.SignatureKey+"="+encoded)
	case c.Format == FormatStandard && v1a:
		m.Header.Set(header, "v1a,"+encoded)
	case c.Format == FormatStandard:
		m.Header.Set(header, "v1,"+encoded)
	default:
		m.Header.Set(header, c.Prefix+encoded)
	}
	return nil
}

// signBytes signs message with key under the validated scheme c; v1a is
// set when a standard-format scheme signed with an Ed25519 key.
func signBytes(c *Config, key string, message []byte) (signature []byte, v1a bool, err error) {
	switch {
	case c.Algorithm == AlgorithmECDSAP256:
		private, err := decodeECDSAPrivateKey(key)
		if err != nil {
			return nil, false, err
		}
		digest := sha256.Sum256(message)
		signature, err := ecdsa.SignASN1(rand.Reader, private, digest[:])
		return signature, false, err
	case c.Algorithm == AlgorithmEd25519 || c.Format == FormatStandard && strings.HasPrefix(key, "whsk_"):
		private, err := decodeEd25519PrivateKey(key)
		if err != nil {
			return nil, false, err
		}
		return ed25519.Sign(private, message), c.Format == FormatStandard, nil
	}
	secret, err := decodeSecret(key, c.SecretEncoding, 1)
	if err != nil {
		return nil, false, err
	}
	newHash, _ := hashFor(c.Algorithm)
	mac := hmac.New(newHash, secret)
	mac.Write(message)
	return mac.Sum(nil), false, nil
}

// signedParams reports whether {params} signs m's form body (see
// Verifier.bodyParams); when the body is not a form, its hash is appended
// to m.URL and {params} signs nothing.
func signedParams(c *Config, m *Message) (formBody bool, err error) {
	if isForm(m.Header) {
		form, err := parseForm(m.Body)
		if err != nil {
			return false, err
		}
		form.release()
		return true, nil
	}
	sum := sha256.Sum256(m.Body)
	separator := "?"
	if strings.Contains(m.URL, "?") {
		separator = "&"
	}
	m.URL += separator + c.BodyHashParam + "=" + hex.EncodeToString(sum[:])
	return false, nil
}

func encodeSignature(encoding string, signature []byte, v1a bool) string {
	switch {
	case v1a || encoding == EncodingBase64:
		return base64.StdEncoding.EncodeToString(signature)
	case encoding == EncodingBase64URL:
		return base64.RawURLEncoding.EncodeToString(signature)
	default:
		return hex.EncodeToString(signature)
	}
}

func formatTimestamp(ts time.Time, unit string) string {
	switch unit {
	case UnitMilliseconds:
		return strconv.FormatInt(ts.UnixMilli(), 10)
	case UnitRFC3339:
		return ts.UTC().Format(time.RFC3339Nano)
	default:
		return strconv.FormatInt(ts.Unix(), 10)
	}
}
