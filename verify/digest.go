package verify

import (
	"crypto/sha256"
	"hash"
	"net/textproto"
	"sync"
)

// SignsHeader reports whether the signature covers the value of header
// name: it is the IDHeader and the signed template uses {id}, or the
// TimestampHeader and the template uses {timestamp}. A value the signature
// does not cover can be changed by anyone who replays a request.
func (c *Config) SignsHeader(name string) bool {
	template, err := parseTemplate(c.Signed)
	if err != nil || name == "" {
		return false
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
	return template.usesID && name == textproto.CanonicalMIMEHeaderKey(c.IDHeader) ||
		template.usesTimestamp && name == textproto.CanonicalMIMEHeaderKey(c.TimestampHeader)
}

// digestState is a SHA-256 state plus the scratch buffer the template streams strings through.
type digestState struct {
	hash    hash.Hash
	scratch [256]byte
	sum     [sha256.Size]byte // Sum's destination: a local would escape through the interface
}

var digests = sync.Pool{New: func() any { return &digestState{hash: sha256.New()} }}

// SignedDigest is the SHA-256 of the bytes the signature of a verified
// request covers: two requests with one digest carry the same signed
// message, whatever their unsigned headers say. result must be what Verify
// returned for the same headers and body.
func (v *Verifier) SignedDigest(result Result, body []byte) [sha256.Size]byte {
	if len(v.template.segments) == 1 && v.template.usesBody {
		return sha256.Sum256(body)
	}
	state := digests.Get().(*digestState)
	defer digests.Put(state)
	state.hash.Reset()
	v.template.writeTo(state.hash, state.scratch[:], &result.fields, body)
	state.hash.Sum(state.sum[:0])
	return state.sum
}
