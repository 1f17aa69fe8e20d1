package hooktest

import (
	"crypto/ed25519"
	"encoding/hex"

	"github.com/hookgate/hookgate/verify"
)

// KeyPair is a provider's signing key and the public key the gateway is given, both as text.
type KeyPair struct{ Private, Public string }

// Ed25519Pair is the Ed25519 key pair of seed (32 bytes), each key in hex.
func Ed25519Pair(seed string) KeyPair {
	key := ed25519.NewKeyFromSeed([]byte(seed))
	return KeyPair{hex.EncodeToString(key.Seed()), hex.EncodeToString(key.Public().(ed25519.PublicKey))}
}

// TaskServiceScheme is the scheme the task service's receiver checks (../shared/seeds): sha256= and
// the hex HMAC-SHA256 of "{timestamp}.{body}", the timestamp in seconds in x-webhook-timestamp.
var TaskServiceScheme = verify.Config{SignatureHeader: "X-Webhook-Signature", Prefix: "sha256=", Encoding: "hex",
	Signed: "{timestamp}.{body}", TimestampHeader: "X-Webhook-Timestamp", TimestampUnit: "s"}
