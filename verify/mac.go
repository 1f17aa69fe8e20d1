package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"sync"
)

// maxMACSize is the largest MAC any supported algorithm produces (SHA-512).
const maxMACSize = sha512.Size

// hashFor returns the constructor and MAC size of a validated algorithm name.
func hashFor(algorithm string) (func() hash.Hash, int) {
	switch algorithm {
	case AlgorithmSHA1:
		return sha1.New, sha1.Size
	case AlgorithmSHA512:
		return sha512.New, sha512.Size
	default:
		return sha256.New, sha256.Size
	}
}

// macState is one keyed HMAC plus the buffers used with it. It is owned by
// one goroutine between a pool Get and Put.
type macState struct {
	mac     hash.Hash
	sum     [maxMACSize]byte
	scratch [256]byte
	staged  stagingWriter
}

// stagingWriter gathers a template's signed bytes for one Write into the hash. SHA-1 on
// amd64 without SHA-NI takes its fast path only for a write of 256 bytes or more: the URL and
// the form parameters written apart cost Twilio two more blocks at the slow one.
type stagingWriter struct{ signed []byte }

// maxStagedForm is the largest signed message staged: past it, the two blocks saved are not worth a copy.
const maxStagedForm = 4 << 10

func (s *stagingWriter) Write(p []byte) (int, error) {
	s.signed = append(s.signed, p...)
	return len(p), nil
}

// keyedMAC hands out reusable HMAC states for one secret, so concurrent
// verifications neither share a hash nor re-derive the key each time.
type keyedMAC struct {
	pool sync.Pool
}

func newKeyedMAC(newHash func() hash.Hash, key []byte) *keyedMAC {
	k := &keyedMAC{}
	k.pool.New = func() any { return &macState{mac: hmac.New(newHash, key)} }
	return k
}

// compute runs fn with the MAC of the signed bytes. The slice passed to fn
// is only valid during the call.
func (k *keyedMAC) compute(t *signedTemplate, fields *signedFields, body []byte, fn func(mac []byte)) {
	state := k.pool.Get().(*macState)
	state.mac.Reset()
	// The whole message, URL included, is measured: a long URL would be copied 256 bytes at a
	// time into a growing buffer, for each URL variant tried, when its chunks take the fast path.
	if fields.form != nil && t.size(fields, body) <= maxStagedForm {
		state.staged.signed = state.staged.signed[:0]
		t.writeTo(&state.staged, state.scratch[:], fields, body)
		state.mac.Write(state.staged.signed)
	} else {
		t.writeTo(state.mac, state.scratch[:], fields, body)
	}
	fn(state.mac.Sum(state.sum[:0]))
	k.pool.Put(state)
}
