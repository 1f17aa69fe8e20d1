package jsonpath

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// hookgate reads JSON from a verified body (`only json`, `id json`, `version json`, a scheme's
// timestamp in the body) and must read it as the app will, at a cost the body budget covers. Two
// kinds of body break that, and are refused 400 on a route that reads JSON:
//
//   - Deep nesting. gjson validates recursively, a Go stack frame per level, so one signed 1 MiB
//     body of `[[[[…` grew Caddy by a hundred MiB outside the budget. The depth is counted first,
//     in one flat pass, and a body nested deeper than MaxDepth is never parsed.
//   - A key spelt twice. gjson takes the first of two equal keys; Go's encoding/json, JavaScript
//     and most apps the last, and encoding/json fills a struct's field from a key in any letter
//     case. So where a key on a path hookgate reads appears more than once in its object (after
//     decoding `\u` escapes, in any letter case), the filter, the ledger and the app could each
//     take another value: hookgate refuses to guess.
//
// Paths are plain (keys and array indexes between dots): gjson's wildcards, queries and
// modifiers pick among several values, which no app reads alike.

// MaxDepth is how deeply the arrays and objects of a body hookgate reads JSON from may nest.
// Webhook payloads nest a handful of levels; encoding/json allows 10,000, but 128 keeps gjson's
// recursion small.
const MaxDepth = 128

// ErrNotJSON is a body that is not valid JSON. A filter does not match it; an ID or version
// cannot be read from it.
var ErrNotJSON = errors.New("body is not valid JSON")

// Refusal is a JSON body hookgate will not read: too deeply nested, or with a key on the path
// spelt twice. It is answered 400, whatever reads it.
type Refusal struct{ reason string }

func (e *Refusal) Error() string { return e.reason }

var errTooDeep = &Refusal{fmt.Sprintf("the JSON body nests arrays and objects more than %d levels deep", MaxDepth)}

// Path is a path into a JSON body: object keys and array indexes separated by dots, a `\`
// making the character after it part of the key.
type Path struct {
	text  string   // as configured, for reasons
	steps []string // the keys, unescaped
}

// Compile splits a configured path into its steps (Parse), keeping its text for reasons.
func Compile(text string) (Path, error) {
	steps, err := Parse(text)
	return Path{text: text, steps: steps}, err
}

// Body reads JSON from one request's verified body, checking it once, on the first read.
// The zero Body reads an empty body.
type Body struct {
	raw     []byte
	checked bool
	err     error // ErrNotJSON or errTooDeep
}

// NewBody reads raw, which must not change while the Body is read.
func NewBody(raw []byte) Body { return Body{raw: raw} }

// Raw is the body as read.
func (b *Body) Raw() []byte { return b.raw }

func (b *Body) check() error {
	if !b.checked {
		b.checked = true
		switch {
		case !withinDepth(unsafe.String(unsafe.SliceData(b.raw), len(b.raw)), MaxDepth):
			b.err = errTooDeep
		case !gjson.ValidBytes(b.raw): // recursive, but now at most MaxDepth deep
			b.err = ErrNotJSON
		}
	}
	return b.err
}

// get is the value at path: a Result that does not exist when it is missing. Its error is
// ErrNotJSON or a *Refusal.
func (b *Body) Get(path *Path) (gjson.Result, error) {
	if err := b.check(); err != nil {
		return gjson.Result{}, err
	}
	// Read in place, and only the value found is parsed: the body may be a pooled buffer, so that
	// value is copied out before it returns.
	doc := unsafe.String(unsafe.SliceData(b.raw), len(b.raw))
	value := doc[skipSpace(doc, 0):]
	for _, step := range path.steps {
		var found bool
		switch value[0] {
		case '{':
			var spelt string
			if value, found, spelt = member(value, step); spelt != "" {
				return gjson.Result{}, &Refusal{fmt.Sprintf("JSON field %s: the key %q %s in its object "+
					"(counting \\u escapes and letter case alike), and apps differ on which one they read", path.text, step, spelt)}
			}
		case '[':
			value, found = element(value, step)
		}
		if !found {
			return gjson.Result{}, nil
		}
	}
	if value[0] == '"' && !decodedAlike(value) {
		return gjson.Result{}, &Refusal{fmt.Sprintf("JSON field %s: its text holds invalid UTF-8 or a lone \\u surrogate, which apps decode differently", path.text)}
	}
	res := gjson.Parse(value)
	res.Raw, res.Str = strings.Clone(res.Raw), strings.Clone(res.Str)
	return res, nil
}

// member is the value of the object obj at key. spelt, when not empty, says why obj names no
// one value by key: the key appears more than once, or only in another letter case.
func member(obj, key string) (value string, found bool, spelt string) {
	matches, other := 0, ""
	eachMember(obj, func(rawKey, v string) bool {
		k, ok := keyText(rawKey, key)
		if !ok || !strings.EqualFold(k, key) {
			return true
		}
		matches++
		if k == key {
			value, found = v, true
		} else {
			other = k
		}
		return matches < 2
	})
	switch {
	case matches > 1:
		return "", false, "appears more than once"
	case matches == 1 && !found:
		return "", false, fmt.Sprintf("appears only as %q", other)
	}
	return value, found, ""
}

// element is the value of the array arr at the index step (digits, no leading zero).
func element(arr, step string) (value string, found bool) {
	if len(step) > 1 && step[0] == '0' || strings.TrimLeft(step, "0123456789") != "" {
		return "", false
	}
	n, err := strconv.Atoi(step)
	if err != nil {
		return "", false
	}
	eachElement(arr, func(v string) bool {
		if n == 0 {
			value, found = v, true
		}
		n--
		return n >= 0
	})
	return value, found
}

// A flat scanner of JSON that gjson has validated: it finds the members of an object and the
// elements of an array without parsing (so without copying) the values it steps over, and
// counts nesting without recursion. Body walks a path with it and parses only the value
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
