package verify

import (
	"bytes"
	"io"
	"slices"
	"sync"
)

// A parsed form larger than these is not kept for reuse: a hostile request with a huge form
// costs its own allocation once, instead of pinning its buffers in the pool.
const (
	maxPooledFormBytes  = 64 << 10
	maxPooledFormParams = 1024
)

// formParams are the parameters of an application/x-www-form-urlencoded body in the order
// Twilio signs them (its {params}): sorted by name, then value, each distinct pair once.
// Names and values are decoded into one buffer, so a warm parse allocates nothing.
type formParams struct {
	text   []byte      // the decoded names and values, in the body's order
	pairs  []formParam // into text
	signed []byte      // the pairs in order, each name then value: one Write into the hash
}

// formParam is one name=value pair: text[start:middle] is the name, text[middle:end] the value.
type formParam struct{ start, middle, end int }

var formPool = sync.Pool{New: func() any { return new(formParams) }}

// parseForm reads body as url.ParseQuery reads a query, refusing it with ParseQuery's error
// where ParseQuery would return one: more pairs than its limit, a ";" separator, a bad
// escape. The caller releases the result.
func parseForm(body []byte) (*formParams, error) {
	pairs := bytes.Count(body, []byte{'&'}) + 1
	if !withinQueryLimit(pairs) {
		return nil, errTooManyParams
	}
	if bytes.IndexByte(body, ';') >= 0 {
		return nil, errSemicolon
	}
	f := formPool.Get().(*formParams)
	// Sized once: a large form allocates three buffers, not a doubling series of each.
	f.text, f.signed = slices.Grow(f.text[:0], len(body)), slices.Grow(f.signed[:0], len(body))
	f.pairs = slices.Grow(f.pairs[:0], pairs)
	for rest := body; len(rest) > 0; {
		pair := rest
		if i := bytes.IndexByte(rest, '&'); i >= 0 {
			pair, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(pair) == 0 {
			continue
		}
		name, value := pair, []byte(nil)
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			name, value = pair[:i], pair[i+1:]
		}
		p := formParam{start: len(f.text)}
		var nameOK, valueOK bool
		f.text, nameOK = appendUnescaped(f.text, name)
		p.middle = len(f.text)
		if nameOK {
			f.text, valueOK = appendUnescaped(f.text, value)
		}
		if !nameOK || !valueOK {
			f.release()
			if !nameOK {
				return nil, escapeError(name)
			}
			return nil, escapeError(value)
		}
		p.end = len(f.text)
		f.pairs = append(f.pairs, p)
	}
	slices.SortFunc(f.pairs, f.compare)
	f.pairs = slices.CompactFunc(f.pairs, func(a, b formParam) bool { return f.compare(a, b) == 0 })
	for _, p := range f.pairs {
		f.signed = append(f.signed, f.text[p.start:p.end]...)
	}
	return f, nil
}

// compare orders pairs by name, then by value, byte by byte.
func (f *formParams) compare(a, b formParam) int {
	if c := bytes.Compare(f.text[a.start:a.middle], f.text[b.start:b.middle]); c != 0 {
		return c
	}
	return bytes.Compare(f.text[a.middle:a.end], f.text[b.middle:b.end])
}

// writeTo writes each pair's name then value, which is what {params} signs. One Write lets
// the hash take whole blocks at its fastest, not a partial block per pair.
func (f *formParams) writeTo(w io.Writer) {
	w.Write(f.signed)
}

// release hands f back for reuse; f must not be used after.
func (f *formParams) release() {
	if cap(f.text) <= maxPooledFormBytes && cap(f.signed) <= maxPooledFormBytes && cap(f.pairs) <= maxPooledFormParams {
		formPool.Put(f)
	}
}
