package verify

import (
	"fmt"
	"io"
	"strings"
)

type segmentKind uint8

const (
	literalSegment segmentKind = iota
	idSegment
	timestampSegment
	bodySegment
	methodSegment
	urlSegment
	paramsSegment
)

// segment is one piece of a signed-bytes template: a literal or a placeholder.
type segment struct {
	kind    segmentKind
	literal []byte
}

// signedTemplate is a Config.Signed template split into segments, so the
// signed bytes can be streamed into the hash without being assembled.
type signedTemplate struct {
	segments      []segment
	usesID        bool
	usesTimestamp bool
	usesBody      bool
	usesMethod    bool
	usesURL       bool
	usesParams    bool
}

// signedFields are the request's values a template can sign, besides the body.
type signedFields struct {
	id, timestamp, method, url string
	// formBody is set when {params} signs the body's form parameters; else it signs nothing.
	formBody bool
	// form is the body's parsed form while a verification holds it, so that
	// it is parsed once whatever the number of keys tried; without it, the
	// body is parsed again.
	form *formParams
}

var placeholders = map[string]segmentKind{
	"id":        idSegment,
	"timestamp": timestampSegment,
	"body":      bodySegment,
	"method":    methodSegment,
	"url":       urlSegment,
	"params":    paramsSegment,
}

// parseTemplate splits a template into literals and {id}, {timestamp},
// {body} placeholders. A brace that does not open a {name} is literal text;
// an unknown {name} is an error.
func parseTemplate(text string) (signedTemplate, error) {
	var t signedTemplate
	var literal strings.Builder
	flushLiteral := func() {
		if literal.Len() > 0 {
			t.segments = append(t.segments, segment{kind: literalSegment, literal: []byte(literal.String())})
			literal.Reset()
		}
	}
	for i := 0; i < len(text); {
		name, width := placeholderAt(text[i:])
		if width == 0 {
			literal.WriteByte(text[i])
			i++
			continue
		}
		kind, known := placeholders[name]
		if !known {
			return t, fmt.Errorf("the signed template %q uses unknown placeholder {%s}: use {id}, {timestamp}, {body}, {method}, {url} or {params}", text, name)
		}
		flushLiteral()
		t.segments = append(t.segments, segment{kind: kind})
		t.usesID = t.usesID || kind == idSegment
		t.usesTimestamp = t.usesTimestamp || kind == timestampSegment
		t.usesBody = t.usesBody || kind == bodySegment
		t.usesMethod = t.usesMethod || kind == methodSegment
		t.usesURL = t.usesURL || kind == urlSegment
		t.usesParams = t.usesParams || kind == paramsSegment
		i += width
	}
	flushLiteral()
	return t, nil
}

// placeholderAt returns the name and total width of a "{name}" at the start
// of text, where name is letters, digits or underscores; width 0 if none.
func placeholderAt(text string) (name string, width int) {
	if len(text) < 3 || text[0] != '{' {
		return "", 0
	}
	for i := 1; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '}' && i > 1:
			return text[1:i], i + 1
		case c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		default:
			return "", 0
		}
	}
	return "", 0
}

// writeTo streams the signed bytes into w. scratch is a caller-owned
// buffer used to pass strings to the hash without allocating.
func (t *signedTemplate) writeTo(w io.Writer, scratch []byte, fields *signedFields, body []byte) {
	for _, s := range t.segments {
		switch s.kind {
		case literalSegment:
			w.Write(s.literal)
		case idSegment:
			writeString(w, scratch, fields.id)
		case timestampSegment:
			writeString(w, scratch, fields.timestamp)
		case bodySegment:
			w.Write(body)
		case methodSegment:
			writeString(w, scratch, fields.method)
		case urlSegment:
			writeString(w, scratch, fields.url)
		case paramsSegment:
			writeFormParams(w, fields, body)
		}
	}
}

// size is the length of the signed bytes writeTo writes.
func (t *signedTemplate) size(fields *signedFields, body []byte) int {
	n := 0
	for _, s := range t.segments {
		switch s.kind {
		case literalSegment:
			n += len(s.literal)
		case idSegment:
			n += len(fields.id)
		case timestampSegment:
			n += len(fields.timestamp)
		case bodySegment:
			n += len(body)
		case methodSegment:
			n += len(fields.method)
		case urlSegment:
			n += len(fields.url)
		case paramsSegment:
			if fields.form != nil {
				n += len(fields.form.signed)
			}
		}
	}
	return n
}

// writeString writes s to w through scratch, chunk by chunk.
func writeString(w io.Writer, scratch []byte, s string) {
	for len(s) > 0 {
		n := copy(scratch, s)
		w.Write(scratch[:n])
		s = s[n:]
	}
}

// writeFormParams writes what {params} signs: the body's form parameters, if it signs them.
func writeFormParams(w io.Writer, fields *signedFields, body []byte) {
	switch {
	case fields.form != nil:
		fields.form.writeTo(w)
	case fields.formBody:
		if form, err := parseForm(body); err == nil { // it parsed when the request was verified
			form.writeTo(w)
			form.release()
		}
	}
}
