package deliver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/dedupe"
)

// The headers hookgate adds to every forwarded request.
const (
	headerEventID  = "Hookgate-Event-Id"
	headerAttempt  = "Hookgate-Attempt"
	headerVerified = "Hookgate-Verified"
)

// OwnHeader reports whether name is one of the headers only hookgate may set (incoming ones are
// dropped): Hookgate-*, in any case, and with `_` or `.` for `-`, since CGI, PHP, Rack and Django
// read those spellings as the same variable (HTTP_HOOKGATE_VERIFIED) as the hyphenated one.
func OwnHeader(name string) bool {
	const prefix = "hookgate-"
	if len(name) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		c := name[i]
		switch {
		case c == '_' || c == '.':
			c = '-'
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// hopByHopHeaders describe one connection, not the event, so they are not forwarded.
// Content-Length is recomputed from the body. Proxy-* headers are dropped by prefix.
var hopByHopHeaders = map[string]bool{
	"Connection":        true,
	"Keep-Alive":        true,
	"Te":                true,
	"Trailer":           true,
	"Transfer-Encoding": true,
	"Upgrade":           true,
	"Content-Length":    true,
}

// newAttemptRequest builds the request that delivers ev to target as attempt number (1-based):
// ev's method, path, query, headers and body as received, minus hop-by-hop and incoming
// Hookgate-* headers, plus hookgate's own three.
func newAttemptRequest(ctx context.Context, target *url.URL, ev *dedupe.Event, number int) (*http.Request, error) {
	destination, err := joinTarget(target, ev.URI)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, ev.Method, destination.String(), bytes.NewReader(ev.Body))
	if err != nil {
		return nil, fmt.Errorf("method %q or URI %q cannot be forwarded: %w", ev.Method, ev.URI, err)
	}
	req.Header = forwardedHeader(ev.Header)
	if _, sent := req.Header["User-Agent"]; !sent {
		req.Header["User-Agent"] = []string{""} // not Go's default: the provider sent none
	}
	req.Header.Set(headerEventID, ev.ID)
	req.Header.Set(headerAttempt, strconv.Itoa(number))
	req.Header.Set(headerVerified, ev.Scheme)
	return req, nil
}

// joinTarget appends requestURI (path and query, as received) to target's path. Only the path
// and query of requestURI are used, so an absolute-form URI cannot send the event elsewhere.
func joinTarget(target *url.URL, requestURI string) (*url.URL, error) {
	received, err := url.ParseRequestURI(requestURI)
	if err != nil {
		return nil, fmt.Errorf("URI %q cannot be forwarded: %w", requestURI, err)
	}
	if !strings.HasPrefix(received.Path, "/") {
		return nil, fmt.Errorf("URI %q cannot be forwarded: %w", requestURI, errors.New("its path does not start with /"))
	}
	joined := *target
	joined.Path = strings.TrimSuffix(target.Path, "/") + received.Path
	joined.RawPath = strings.TrimSuffix(target.EscapedPath(), "/") + received.EscapedPath()
	joined.RawQuery = received.RawQuery
	joined.ForceQuery = received.ForceQuery
	return &joined, nil
}

// forwardedHeader copies the received headers that describe the event: everything except
// hop-by-hop headers (including any named in Connection) and incoming Hookgate-* headers.
func forwardedHeader(received http.Header) http.Header {
	connectionListed := make(map[string]bool)
	for _, value := range received.Values("Connection") {
		for name := range strings.SplitSeq(value, ",") {
			connectionListed[textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))] = true
		}
	}
	forwarded := make(http.Header, len(received)+3)
	for name, values := range received {
		canonical := textproto.CanonicalMIMEHeaderKey(name)
		if hopByHopHeaders[canonical] || connectionListed[canonical] ||
			strings.HasPrefix(canonical, "Proxy-") || OwnHeader(canonical) {
			continue
		}
		forwarded[canonical] = append(forwarded[canonical], values...)
	}
	return forwarded
}
