package verify

import (
	"errors"
	"net/url"
	"strings"
)

// maxQueryParams is the most parameters url.ParseQuery reads from one query or form by default
// (see withinQueryLimit): beyond it the whole text is refused, before any parameter is decoded.
const maxQueryParams = 10000

var (
	errTooManyParams = errors.New("number of URL query parameters exceeded limit")
	errSemicolon     = errors.New("invalid semicolon separator in query")
)

// queryByte decodes the byte of a query component that starts at s[i], as url.QueryUnescape
// does: "+" is a space and "%XX" a byte. ok is false at a "%" not followed by two hex digits.
func queryByte[T string | []byte](s T, i int) (c byte, width int, ok bool) {
	switch s[i] {
	case '+':
		return ' ', 1, true
	case '%':
		if i+2 >= len(s) {
			return 0, 0, false
		}
		high, highOK := hexValue(s[i+1])
		low, lowOK := hexValue(s[i+2])
		return high<<4 | low, 3, highOK && lowOK
	}
	return s[i], 1, true
}

func hexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// appendUnescaped appends the decoded query component s to dst, copying the plain runs
// between escapes whole. ok is false at a bad escape, and dst is then as it was.
func appendUnescaped(dst, s []byte) (out []byte, ok bool) {
	start, plain := len(dst), 0
	for i := 0; i < len(s); {
		if c := s[i]; c != '%' && c != '+' {
			i++
			continue
		}
		dst = append(dst, s[plain:i]...)
		c, width, ok := queryByte(s, i)
		if !ok {
			return dst[:start], false
		}
		dst = append(dst, c)
		i += width
		plain = i
	}
	return append(dst, s[plain:]...), true
}

// escapeError is the error url.QueryUnescape gives for s, which has a bad escape.
func escapeError(s []byte) error {
	for i := 0; i < len(s); i++ {
		if _, _, ok := queryByte(s, i); !ok {
			return url.EscapeError(string(s[i:min(i+3, len(s))]))
		}
	}
	return nil
}

// unescapesTo reports whether the query component s decodes, without a bad escape, to want.
func unescapesTo(s, want string) bool {
	j := 0
	for i := 0; i < len(s); j++ {
		c, width, ok := queryByte(s, i)
		if !ok || j == len(want) || c != want[j] {
			return false
		}
		i += width
	}
	return j == len(want)
}

// queryValue appends to dst the value of the first parameter of rawURL's query named name,
// the one url.ParseQuery(query).Get(name) returns: pairs it cannot read (a ";" separator, a
// bad escape) are skipped, and a query of too many pairs has none. It allocates only when the
// value does not fit dst.
func queryValue(dst []byte, rawURL, name string) ([]byte, bool) {
	_, query, found := strings.Cut(rawURL, "?")
	if name == "" || !found || !withinQueryLimit(strings.Count(query, "&")+1) {
		return dst, false
	}
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		if strings.Contains(pair, ";") {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		if !unescapesTo(key, name) {
			continue
		}
		start, ok := len(dst), true
		for i := 0; i < len(value) && ok; {
			var c byte
			var width int
			c, width, ok = queryByte(value, i)
			dst, i = append(dst, c), i+width
		}
		if ok {
			return dst, true
		}
		dst = dst[:start]
	}
	return dst, false
}
