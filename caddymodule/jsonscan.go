package caddymodule

import (
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// A flat scanner of JSON that gjson has validated: it finds the members of an object and the
// elements of an array without parsing (so without copying) the values it steps over, and
// counts nesting without recursion. jsonBody walks a path with it and parses only the value
// found.

// withinDepth reports whether s nests arrays and objects at most limit deep, counting brackets
// outside strings in one pass: refusing a hostile body costs nothing. It needs no valid JSON.
func withinDepth(s string, limit int) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = stringEnd(s, i+1)
		case '[', '{':
			if depth++; depth > limit {
				return false
			}
		case ']', '}':
			depth--
		}
	}
	return true
}

// stringEnd is the index of the quote that ends the string whose text begins at i, or len(s): the
// next quote not escaped by an odd run of backslashes before it.
func stringEnd(s string, i int) int {
	for {
		q := strings.IndexByte(s[i:], '"')
		if q < 0 {
			return len(s)
		}
		q += i
		backslashes := 0
		for j := q - 1; j >= i && s[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// skipSpace is the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// valueEnd is the index just past the value that begins at s[i].
func valueEnd(s string, i int) int {
	switch s[i] {
	case '"':
		return stringEnd(s, i+1) + 1
	case '{', '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				i = stringEnd(s, i+1)
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(s)
	}
	for i < len(s) && !strings.ContainsRune(",}] \t\n\r", rune(s[i])) { // a number, true, false or null
		i++
	}
	return i
}

// eachMember calls fn with the raw key (quoted) and the raw value of each member of the object
// obj begins with, until fn returns false.
func eachMember(obj string, fn func(key, value string) bool) {
	for i := skipSpace(obj, 1); i < len(obj) && obj[i] == '"'; {
		keyEnd := stringEnd(obj, i+1) + 1
		start := skipSpace(obj, skipSpace(obj, keyEnd)+1) // past the colon
		end := valueEnd(obj, start)
		if !fn(obj[i:keyEnd], obj[start:end]) {
			return
		}
		if i = skipSpace(obj, end); i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
}

// eachElement calls fn with the raw value of each element of the array arr begins with, until fn
// returns false.
func eachElement(arr string, fn func(value string) bool) {
	for i := skipSpace(arr, 1); i < len(arr) && arr[i] != ']'; {
		end := valueEnd(arr, i)
		if !fn(arr[i:end]) {
			return
		}
		if i = skipSpace(arr, end); i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
}

// keyText is the text of the raw key (quoted), decoded; ok is false when it cannot equal like, in
// any letter case, so it was not decoded: a key's escapes are decoded only when it may match,
// so that a body of escaped keys costs no copy of them.
func keyText(raw, like string) (text string, ok bool) {
	inner := raw[1 : len(raw)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	// An escape spells one rune in at most 12 bytes (a surrogate pair).
	if len(inner)/12 > utf8.RuneCountInString(like) {
		return "", false
	}
	return gjson.Parse(raw).Str, true
}

// decodedAlike reports whether every app decodes the raw string (quoted) to the same text: it
// holds valid UTF-8 only, and every \u escape of a surrogate is half of a pair. Go and gjson read
// invalid bytes and a lone surrogate as U+FFFD, JavaScript keeps a lone surrogate as it is, and
// gjson keeps invalid bytes: two event IDs an app tells apart would be one in the ledger.
func decodedAlike(raw string) bool {
	if !utf8.ValidString(raw) {
		return false
	}
	highPending := false // the escape before was a high surrogate
	for i := 1; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			if highPending {
				return false
			}
			continue
		}
		i++
		if raw[i] != 'u' || i+4 >= len(raw) {
			if highPending {
				return false
			}
			continue
		}
		r := hexRune(raw[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if highPending {
				return false
			}
			highPending = true
		case r >= 0xDC00 && r < 0xE000:
			if !highPending {
				return false
			}
			highPending = false
		case highPending:
			return false
		}
	}
	return !highPending
}

// hexRune is the value of four hex digits (validated JSON has no others after \u).
func hexRune(h string) rune {
	var r rune
	for i := 0; i < len(h); i++ {
		c := rune(h[i])
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		}
		r = r<<4 | c
	}
	return r
}
