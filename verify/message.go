package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
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
// sorted parameters of a form body, each name then value; or, when the URL
// carries BodyHashParam, nothing, once the body is found to hash to it; or
// nothing for an empty body.
func (v *Verifier) bodyParams(m *Message) (string, *Error) {
	if want, ok := queryValue(m.URL, v.config.BodyHashParam); ok {
		sum := sha256.Sum256(m.Body)
		var got [2 * sha256.Size]byte
		hex.Encode(got[:], sum[:])
		if !hmac.Equal(got[:], []byte(strings.ToLower(want))) {
			return "", failure(UnsignedBody, "the body does not hash to the "+v.config.BodyHashParam+" the signed URL carries")
		}
		return "", nil
	}
	if len(m.Body) == 0 {
		return "", nil // nothing to cover: a GET webhook's parameters are in its signed URL
	}
	params, isForm, err := formParams(m)
	switch {
	case !isForm:
		return "", failure(UnsignedBody, "the signature covers no body: it is not a form and the URL carries no "+v.config.BodyHashParam)
	case err != nil:
		return "", failure(UnsignedBody, "the form body does not parse: "+err.Error())
	}
	return params, nil
}

// formParams is what {params} signs for a form body: its parameters sorted, each name then
// value. isForm is false when the Content-Type is not a form's.
func formParams(m *Message) (params string, isForm bool, err error) {
	if media, _, _ := mime.ParseMediaType(m.Header.Get("Content-Type")); media != "application/x-www-form-urlencoded" {
		return "", false, nil
	}
	form, err := url.ParseQuery(string(m.Body))
	if err != nil {
		return "", true, err
	}
	return sortedParams(form), true, nil
}

// sortedParams concatenates each parameter name with each of its distinct
// values, names and values sorted, as Twilio signs them.
func sortedParams(form url.Values) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(form)) {
		values := slices.Clone(form[name])
		slices.Sort(values)
		for _, value := range slices.Compact(values) {
			b.WriteString(name)
			b.WriteString(value)
		}
	}
	return b.String()
}

// queryValue returns the value of a query parameter of rawURL.
func queryValue(rawURL, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	_, query, found := strings.Cut(rawURL, "?")
	if !found {
		return "", false
	}
	// A pair url.ParseQuery cannot read (a ";" separator, a bad escape) must not hide the
	// others: the provider signed the hash whatever its neighbours.
	values, _ := url.ParseQuery(query)
	if !values.Has(name) {
		return "", false
	}
	return values.Get(name), true
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
