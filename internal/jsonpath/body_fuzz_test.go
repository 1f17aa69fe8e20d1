package jsonpath

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// walkEncodingJSON is the value an app decoding body with encoding/json into map[string]any
// (numbers kept as written) finds at path, and whether it is there; ok is false when
// encoding/json refuses the body.
func walkEncodingJSON(body []byte, path *Path) (value any, found, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, false
	}
	if _, err := dec.Token(); err == nil { // trailing data after the value
		return nil, false, false
	}
	for _, step := range path.steps {
		switch cur := v.(type) {
		case map[string]any:
			if v, found = cur[step]; !found {
				return nil, false, true
			}
		case []any: // an index as JavaScript reads one: digits, no leading zero
			n, err := strconv.Atoi(step)
			if err != nil || n < 0 || n >= len(cur) || step != strconv.Itoa(n) {
				return nil, false, true
			}
			v = cur[n]
		default:
			return nil, false, true
		}
	}
	return v, true, true
}

// sameValue reports whether gjson's res is the value encoding/json decoded.
func sameValue(res gjson.Result, v any) bool {
	switch v := v.(type) {
	case string:
		return res.Type == gjson.String && res.Str == v
	case json.Number:
		return res.Type == gjson.Number && res.Raw == string(v)
	case bool:
		return (res.Type == gjson.True) == v && (res.Type == gjson.True || res.Type == gjson.False)
	case nil:
		return res.Type == gjson.Null
	case map[string]any:
		return res.IsObject()
	case []any:
		return res.IsArray()
	}
	return false
}

// Whatever Body reads from a body without refusing it, an app reading the same body with
// encoding/json reads too: the same value at the same path, the same missing value, and the same
// verdict on whether the body is JSON at all.
func FuzzJSONBodyReadsWhatEncodingJSONReads(f *testing.F) {
	for _, seed := range []struct{ body, path string }{
		{`{"type":"invoice.paid"}`, "type"},
		{`{"t\u0079pe":"a"}`, "type"},
		{`{"data":{"object":{"id":"in_1"}}}`, "data.object.id"},
		{`[{"eventId":"e1"}]`, "0.eventId"},
		{`{"id":"a\ud800"}`, "id"},
		{`{"id":"a\ud800\u0041"}`, "id"},
		{`{"id":"a\udc00\ud800"}`, "id"},
		{`{"id":1e2}`, "id"},
		{`{"id":-0}`, "id"},
		{"\ufeff{\"id\":\"x\"}", "id"},
		{`{"id":"x"} `, "id"},
		{`{"id":"x"}x`, "id"},
		{`{"a":[1,2,{"b":"c"}]}`, "a.2.b"},
		{`{"a":[1,2,{"b":"c"}]}`, "a.+2.b"},
		{`{"Id":"x"}`, "id"},
		{"{\"\u0131d\":\"x\"}", "id"},
		{`{"a\\.b":1}`, `a\.b`},
	} {
		f.Add([]byte(seed.body), seed.path)
	}
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		path, err := Compile(text)
		if err != nil {
			return
		}
		doc := &Body{raw: body}
		res, err := doc.Get(&path)
		var refused *Refusal
		switch {
		case errors.As(err, &refused):
			return
		case errors.Is(err, ErrNotJSON):
			if json.Valid(body) {
				t.Fatalf("body %q: Body says it is not JSON, encoding/json reads it", body)
			}
			return
		case err != nil:
			t.Fatalf("body %q: unexpected error %v", body, err)
		}
		v, found, ok := walkEncodingJSON(body, &path)
		if !ok {
			t.Fatalf("body %q: Body reads it as JSON (%s: %q), encoding/json refuses it", body, text, res.Raw)
		}
		if res.Exists() != found {
			t.Fatalf("body %q, path %q: Body finds a value: %v (%q), encoding/json: %v (%#v)", body, text, res.Exists(), res.Raw, found, v)
		}
		if found && !sameValue(res, v) {
			t.Fatalf("body %q, path %q: Body reads %s %q, encoding/json reads %#v", body, text, res.Type, res.String(), v)
		}
	})
}

// withinDepth never passes a body that a parser reading it token by token finds nested deeper
// than the limit before the body stops being JSON: gjson's recursive validator goes no deeper.
func FuzzJSONDepthCountIsNeverBelowTheParsersDepth(f *testing.F) {
	for _, seed := range []string{`[[[[]]]]`, `["\\",[[[]]]]`, `{"k\"[[[":[[[[]]]]}`, `]]]][[[[[[`, `"\u005c"[[[[`, `[[[["`, `{"a":{"a":{"a":{"a":1}}}}`} {
		f.Add([]byte(seed))
	}
	const limit = 3
	f.Fuzz(func(t *testing.T, body []byte) {
		if !withinDepth(string(body), limit) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		depth := 0
		for {
			tok, err := dec.Token()
			if err != nil {
				return
			}
			switch tok {
			case json.Delim('['), json.Delim('{'):
				if depth++; depth > limit {
					t.Fatalf("withinDepth(%q, %d) passes a body encoding/json reads %d levels deep", body, limit, depth)
				}
			case json.Delim(']'), json.Delim('}'):
				depth--
			}
		}
	})
}
