package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// Message is one request as a scheme may sign it.
type Message struct {
	Header http.Header
	Body   []byte
	// Method is the request's method, for schemes that sign it (HubSpot).
	Method string
	// URL is the absolute URL the provider called, for schemes that sign it
	// (Twilio, Square, HubSpot): behind a proxy, the public one, not the one
	// the receiver sees.
	URL string
}

// bodyParams returns what the {params} placeholder signs (Twilio): the
// parameters of a form body, for the caller to release; or nothing, when
// the URL carries BodyHashParam, once the body is found to hash to it; or
// nothing for an empty body.
func (v *Verifier) bodyParams(m *Message) (*formParams, *Error) {
	var buf [2 * sha256.Size]byte
	if want, ok := queryValue(buf[:0], m.URL, v.config.BodyHashParam); ok {
		sum := sha256.Sum256(m.Body)
		var got [2 * sha256.Size]byte
		hex.Encode(got[:], sum[:])
		if !hmac.Equal(got[:], asciiLower(want)) {
			return nil, failure(UnsignedBody, "the body does not hash to the "+v.config.BodyHashParam+" the signed URL carries")
		}
		return nil, nil
	}
	if len(m.Body) == 0 {
		return nil, nil // nothing to cover: a GET webhook's parameters are in its signed URL
	}
	if !isForm(m.Header) {
		return nil, failure(UnsignedBody, "the signature covers no body: it is not a form and the URL carries no "+v.config.BodyHashParam)
	}
	form, err := parseForm(m.Body)
	if err != nil {
		return nil, failure(UnsignedBody, "the form body does not parse: "+err.Error())
	}
	return form, nil
}

// asciiLower lower-cases the ASCII letters of s in place. For a hex digest it matches
// strings.ToLower: no other character lower-cases to a hex digit.
func asciiLower(s []byte) []byte {
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			s[i] = c + 'a' - 'A'
		}
	}
	return s
}

// isForm reports whether h's Content-Type is a form's, as mime.ParseMediaType reads it. The
// usual value, with at most one parameter, is recognised without ParseMediaType, which
// allocates; any other goes through it.
func isForm(h http.Header) bool {
	const form = "application/x-www-form-urlencoded"
	contentType := first(h["Content-Type"]) // h.Get without canonicalising a canonical key
	base, _, _ := strings.Cut(contentType, ";")
	// One parameter cannot be a duplicate, the only parameter error that hides the media type.
	if strings.Count(contentType, ";") <= 1 && asciiEqualFold(strings.TrimSpace(base), form) {
		return true
	}
	media, _, _ := mime.ParseMediaType(contentType)
	return media == form
}

// asciiEqualFold reports whether s is lower, with ASCII letters in either case.
func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// portVariant returns rawURL without its port and user information, or,
// when it has no port, with its scheme's default one.
func portVariant(rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", false
	}
	u.User = nil
	switch {
	case u.Port() != "" && strings.Contains(u.Hostname(), ":"):
		u.Host = "[" + u.Hostname() + "]" // IPv6
	case u.Port() != "":
		u.Host = u.Hostname()
	case u.Scheme == "https":
		u.Host += ":443"
	case u.Scheme == "http":
		u.Host += ":80"
	default:
		return "", false
	}
	return u.String(), true
}
