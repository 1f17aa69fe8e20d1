package verify

import (
	"bytes"
	"cmp"
	"encoding/binary"
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
// A name or value without escapes is read in the body itself; the others are decoded into
// one buffer, so a warm parse allocates nothing.
type formParams struct {
	body   []byte      // the form, while parsing
	text   []byte      // the decoded names and values that had escapes
	pairs  []formParam // into body and text, in the body's order
	order  []pairKey   // the pairs to sort: two words each, without pointers
	signed []byte      // the pairs in order, each name then value: one Write into the hash
}

// formParam is one decoded name=value pair.
type formParam struct{ name, value span }

// pairKey stands for pairs[pair] while sorting. prefix is its name's first 8 bytes,
// big-endian and zero-padded: pairs whose prefixes differ are ordered by them alone.
type pairKey struct {
	prefix uint64
	pair   int
}

// span is body[start:end], or text[start-len(body):end-len(body)] past the body's length.
type span struct{ start, end int }

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
	f.body = body
	// Sized once: a large form allocates three buffers, not a doubling series of each.
	f.text, f.signed = slices.Grow(f.text[:0], len(body)), slices.Grow(f.signed[:0], len(body))
	// Separators alone make no pair: a body "&&&…" is not given an index for each.
	kept := min(pairs, len(body)/2+1) // formPairsBound
	f.pairs, f.order = slices.Grow(f.pairs[:0], kept), slices.Grow(f.order[:0], kept)
	escapes := escapeFinder{text: body, percent: -1, plus: -1}
	for offset := 0; offset < len(body); {
		end := len(body)
		if i := bytes.IndexByte(body[offset:], '&'); i >= 0 {
			end = offset + i
		}
		start := offset
		offset = end + 1
		if start == end {
			continue
		}
		name, value := span{start, end}, span{end, end}
		if i := bytes.IndexByte(body[start:end], '='); i >= 0 {
			name.end, value.start = start+i, start+i+1
		}
		var ok bool
		if escapes.any(name.start, name.end) {
			if name, ok = f.unescape(name); !ok {
				return nil, f.refuse(name)
			}
		}
		if escapes.any(value.start, value.end) {
			if value, ok = f.unescape(value); !ok {
				return nil, f.refuse(value)
			}
		}
		f.order = append(f.order, pairKey{prefix: namePrefix(f.bytes(name)), pair: len(f.pairs)})
		f.pairs = append(f.pairs, formParam{name: name, value: value})
	}
	f.sort()
	for i, k := range f.order {
		if i > 0 && k.prefix == f.order[i-1].prefix && f.compare(f.order[i-1], k) == 0 {
			continue // each distinct pair once
		}
		p := f.pairs[k.pair]
		f.signed = append(append(f.signed, f.bytes(p.name)...), f.bytes(p.value)...)
	}
	f.body = nil
	return f, nil
}

// refuse releases f and returns url.QueryUnescape's error for the body's span bad.
func (f *formParams) refuse(bad span) error {
	err := escapeError(f.body[bad.start:bad.end])
	f.release()
	return err
}

// bytes returns the bytes s stands for.
func (f *formParams) bytes(s span) []byte {
	if base := len(f.body); s.start >= base && s.end > base {
		return f.text[s.start-base : s.end-base]
	}
	return f.body[s.start:s.end]
}

// unescape returns the span of s decoded, appended to f.text. ok is false at a bad escape,
// and s is then returned as it was.
func (f *formParams) unescape(s span) (decoded span, ok bool) {
	start := len(f.text)
	f.text, ok = appendUnescaped(f.text, f.body[s.start:s.end])
	if !ok {
		return s, false
	}
	base := len(f.body)
	return span{base + start, base + len(f.text)}, true
}

// escapeFinder tells whether a span of text holds a "%" or "+", scanning for each at most
// once over the whole text however many spans are asked, in increasing order.
type escapeFinder struct {
	text          []byte
	percent, plus int // the next one at or after the last span asked, len(text) for none, -1 not yet looked
}

// any reports whether text[start:end] holds a "%" or "+"; spans are asked in increasing order.
func (e *escapeFinder) any(start, end int) bool {
	if e.percent < start || e.plus < start { // most spans lie before both: no search
		e.advance(start)
	}
	return e.percent < end || e.plus < end
}

// advance finds the next "%" and "+" at or after start.
func (e *escapeFinder) advance(start int) {
	e.percent = nextByte(e.text, '%', start, e.percent)
	e.plus = nextByte(e.text, '+', start, e.plus)
}

// nextByte returns the index of the first c in text at or after from, given the last answer.
func nextByte(text []byte, c byte, from, last int) int {
	if last >= from {
		return last
	}
	if i := bytes.IndexByte(text[from:], c); i >= 0 {
		return from + i
	}
	return len(text)
}

// sort orders f.order by compare. Binary insertion sort suits the few pairs a webhook sends; a
// large form goes through slices.SortFunc, whose worst case stays n log n.
func (f *formParams) sort() {
	order := f.order
	if len(order) > 32 {
		slices.SortFunc(order, f.compare)
		return
	}
	for i := 1; i < len(order); i++ { // binary insertion: about log2(i) comparisons each
		k, lo, hi := order[i], 0, i
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			// The prefixes order most pairs without a call.
			if q := order[m]; k.prefix < q.prefix || k.prefix == q.prefix && f.compare(k, q) < 0 {
				hi = m
			} else {
				lo = m + 1
			}
		}
		copy(order[lo+1:i+1], order[lo:i])
		order[lo] = k
	}
}

// namePrefix is name's first 8 bytes as a big-endian number, zero-padded. A name shorter
// than another it prefixes has the lesser or an equal prefix, never a greater one.
func namePrefix(name []byte) uint64 {
	if len(name) >= 8 {
		return binary.BigEndian.Uint64(name)
	}
	var prefix uint64
	for i, c := range name { // a loop, not copy: no memmove call for a few bytes
		prefix |= uint64(c) << (56 - 8*i)
	}
	return prefix
}

// compare orders pairs by name, then by value, byte by byte.
func (f *formParams) compare(a, b pairKey) int {
	if a.prefix != b.prefix {
		return cmp.Compare(a.prefix, b.prefix)
	}
	p, q := f.pairs[a.pair], f.pairs[b.pair]
	if c := bytes.Compare(f.bytes(p.name), f.bytes(q.name)); c != 0 {
		return c
	}
	return bytes.Compare(f.bytes(p.value), f.bytes(q.value))
}

// writeTo writes each pair's name then value, which is what {params} signs. One Write lets
// the hash take whole blocks at its fastest, not a partial block per pair.
func (f *formParams) writeTo(w io.Writer) {
	w.Write(f.signed)
}

// release hands f back for reuse; f must not be used after.
func (f *formParams) release() {
	f.body = nil
	if cap(f.text) <= maxPooledFormBytes && cap(f.signed) <= maxPooledFormBytes && cap(f.pairs) <= maxPooledFormParams &&
		cap(f.order) <= maxPooledFormParams {
		formPool.Put(f)
	}
}
