package verify

import "unsafe"

// workingSlack covers what verification allocates besides the buffers WorkingMemory counts: the
// rounding of a large allocation up to whole pages (four of them at most), a URL parsed again for
// its port variant, copies of the signed header values.
const workingSlack = 48 << 10

// pairSize is what parseForm keeps per parameter: its spans, and its key while sorting.
const pairSize = int64(unsafe.Sizeof(formParam{}) + unsafe.Sizeof(pairKey{}))

// WorkingMemory is the most memory, in bytes, one VerifyMessage allocates besides a body of
// bodySize bytes, its pools being empty as many requests at once find them: the signed message
// assembled whole for the Ed25519 keys (which take it in one piece), and, for {params}, the form's
// decoded text, its sorted parameters and their index (and, under a GODEBUG raising url.ParseQuery's
// parameter limit, the query of as many separators it is asked about). A caller that bounds the
// memory of the requests it verifies reserves it with the body. Schemes that stream what they sign
// into a hash (HMAC over the body, ECDSA) need none; header values and the URL a scheme signs are
// bounded by the server's header limit, and count here only within a small slack: a long URL is
// copied once more, for its port variant.
func (v *Verifier) WorkingMemory(bodySize int64) int64 {
	bodySize = max(bodySize, 0)
	var work int64
	if len(v.ed25519) > 0 {
		work += bodySize + workingSlack
	}
	if v.template.usesParams {
		work += 2*bodySize + formPairsBound(bodySize)*pairSize + workingSlack
		if queryLimitNow().raised {
			work += bodySize // withinQueryLimit asks url.ParseQuery about a query of as many separators
		}
	}
	return work
}
