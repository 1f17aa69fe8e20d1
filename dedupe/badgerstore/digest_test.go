package badgerstore

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// signedOnce is a claim of a request whose ID the signature does not cover: the digest of its
// signed bytes is deduplicated too, so a replay under a fresh ID is caught.
func signedOnce(id, digest string) dedupe.Claim {
	c := event(id)
	c.Digest = digest
	return c
}

func TestClaimDedupesDigest(t *testing.T) {
	b := openTest(t)
	first := signedOnce("delivery-1", "body-A")
	expect(t, "first", claim(t, b, first), dedupe.Claimed)
	expect(t, "replay under a fresh ID while in flight", claim(t, b, signedOnce("delivery-2", "body-A")), dedupe.InFlight)
	release(t, b, first)
	expect(t, "the provider's retry after a release", claim(t, b, first), dedupe.Claimed)
	done(t, b, first, time.Hour)

	expect(t, "replay under a fresh ID", claim(t, b, signedOnce("delivery-3", "body-A")), dedupe.Duplicate)
	expect(t, "same ID, other body", claim(t, b, signedOnce("delivery-1", "body-B")), dedupe.Duplicate)
	expect(t, "a new event", claim(t, b, signedOnce("delivery-4", "body-B")), dedupe.Claimed)
	// The refused claims held nothing: the new event's retry is InFlight only because of itself.
	expect(t, "the new event's ID", claim(t, b, signedOnce("delivery-4", "body-C")), dedupe.InFlight)
	expect(t, "no digest, fresh ID", claim(t, b, event("delivery-5")), dedupe.Claimed)
}

func TestAcceptDedupesDigest(t *testing.T) {
	b := openTest(t)
	expect(t, "first", accept(t, b, signedOnce("a", "body-A"), queued("a", base)), dedupe.Claimed)
	expect(t, "replay under a fresh ID", accept(t, b, signedOnce("b", "body-A"), queued("b", base)), dedupe.Duplicate)
	expectNotFound(t, "the replay", b, "b")
	expect(t, "sync claim of the replay", claim(t, b, signedOnce("c", "body-A")), dedupe.Duplicate)

	held := signedOnce("held", "body-H")
	expect(t, "sync claim", claim(t, b, held), dedupe.Claimed)
	expect(t, "accept of its replay while claimed", accept(t, b, signedOnce("d", "body-H"), queued("d", base)), dedupe.InFlight)
	expect(t, "a new event", accept(t, b, signedOnce("e", "body-E"), queued("e", base)), dedupe.Claimed)
}
