package deliver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/dedupe"
)

// The headers hookgate adds to every forwarded request.
const (
	headerEventID  = "Hookgate-Event-Id"
	headerAttempt  = "Hookgate-Attempt"
	headerSequence = "Hookgate-Sequence"
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
	// The URL is set below from the one joined, rather than printed and parsed here again.
	req, err := http.NewRequestWithContext(ctx, ev.Method, "/", bytes.NewReader(ev.Body))
	if err != nil {
		return nil, fmt.Errorf("method %q or URI %q cannot be forwarded: %w", ev.Method, ev.URI, err)
	}
	destination.Host = strings.TrimSuffix(destination.Host, ":") // as NewRequest drops an empty port
	req.URL, req.Host = destination, destination.Host
	var own []string
	req.Header, own = forwardedHeader(ev.Header, 4)
	own[0], own[1], own[2] = ev.ID, strconv.Itoa(number), ev.Scheme
	req.Header[headerEventID] = own[0:1:1] // as Header.Set, in forwardedHeader's allocation
	req.Header[headerAttempt] = own[1:2:2]
	req.Header[headerVerified] = own[2:3:3]
	if _, sent := req.Header["User-Agent"]; !sent {
		req.Header["User-Agent"] = own[3:4:4] // "": not Go's default, as the provider sent none
	}
	if ev.OrderKey != "" { // the event's place in its key's order, for the app to check
		req.Header[headerSequence] = []string{strconv.FormatUint(ev.Seq, 10)}
	}
	// The target's user info is sent as Basic auth, as http.Client would: attempts go to its
	// Transport directly (attempt).
	if user := destination.User; user != nil && req.Header.Get("Authorization") == "" {
		password, _ := user.Password()
		req.SetBasicAuth(user.Username(), password)
	}
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
// hop-by-hop headers (including any named in Connection) and incoming Hookgate-* headers. The
// values are copied into one allocation, which has spare more empty strings after them, returned
// as own, for the caller's headers.
func forwardedHeader(received http.Header, spare int) (forwarded http.Header, own []string) {
	var connectionListed []string
	for _, value := range received.Values("Connection") {
		for name := range strings.SplitSeq(value, ",") {
			connectionListed = append(connectionListed, textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)))
		}
	}
	dropped := func(canonical string) bool {
		return hopByHopHeaders[canonical] || slices.Contains(connectionListed, canonical) ||
			strings.HasPrefix(canonical, "Proxy-") || OwnHeader(canonical)
	}
	count := 0
	for name, values := range received {
		if !dropped(textproto.CanonicalMIMEHeaderKey(name)) {
			count += len(values)
		}
	}
	copies := make([]string, count+spare)
	forwarded = make(http.Header, len(received)+spare)
	for name, values := range received {
		canonical := textproto.CanonicalMIMEHeaderKey(name)
		if dropped(canonical) {
			continue
		}
		n := copy(copies, values)
		if earlier, twice := forwarded[canonical]; twice { // two spellings of one name: rare
			forwarded[canonical] = append(earlier, copies[:n]...)
		} else {
			// The capacity ends at the copy, so that appending to it never overwrites the next.
			forwarded[canonical] = copies[:n:n]
		}
		copies = copies[n:]
	}
	return forwarded, copies
}
