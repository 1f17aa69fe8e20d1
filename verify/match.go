package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// maxSignatureSize is the longest decoded signature: a DER ECDSA P-256 signature.
const maxSignatureSize = 72

// maxAsymmetricSignatures bounds the public-key signatures of one request that are checked:
// each costs a public-key verification per key (about 0.2 ms), and providers send one per
// signing key, which is one, or two while they rotate it.
const maxAsymmetricSignatures = 2

// maxEncodedSize is the longest encoded signature accepted: sha512 or Ed25519 in hex.
const maxEncodedSize = 2 * maxMACSize

// offeredHeaders is what a request's headers offer for verification, read
// without allocating.
type offeredHeaders struct {
	result     Result
	decoded    [maxSignatures][maxSignatureSize]byte // the signatures that decode, of which valid
	size       [maxSignatures]uint8
	asymmetric [maxSignatures]bool // to be checked with a public key
	valid      int
}

// addKeys decodes the secrets and public keys the scheme uses.
func (v *Verifier) addKeys(keys Keys, newHash func() hash.Hash) error {
	c := &v.config
	if c.publicKeyScheme() && len(keys.Secrets) > 0 {
		return fmt.Errorf("the %s scheme verifies %s signatures with the provider's public key: set public_key, not secret", c.Scheme, c.Algorithm)
	}
	if len(keys.PublicKeys) > 0 && !c.publicKeyScheme() && c.Format != FormatStandard {
		return fmt.Errorf("the %s scheme signs with a shared secret (HMAC): set secret, not public_key", c.Scheme)
	}
	if len(keys.Secrets)+len(keys.PublicKeys) == 0 {
		if c.publicKeyScheme() {
			return errors.New("no public key configured: at least one is needed")
		}
		return errors.New("no secret configured: at least one is needed")
	}
	for i, secret := range keys.Secrets {
		key, err := decodeSecret(secret, c.SecretEncoding, i+1)
		if err != nil {
			return err
		}
		v.secrets = append(v.secrets, secretKey{mac: newKeyedMAC(newHash, key), key: key})
	}
	for i, text := range keys.PublicKeys {
		if c.Algorithm == AlgorithmECDSAP256 {
			key, err := decodeECDSAPublicKey(text, i+1)
			if err != nil {
				return err
			}
			v.ecdsa = append(v.ecdsa, key)
			continue
		}
		key, err := decodeEd25519PublicKey(text, i+1) // Ed25519, or the standard format's v1a
		if err != nil {
			return err
		}
		v.ed25519 = append(v.ed25519, key)
	}
	return nil
}

// decodeSignature decodes one encoded signature into the next free slot of
// offered. It reports false if the text has the wrong length, alphabet or
// padding for its kind.
func (v *Verifier) decodeSignature(encoded string, v1a bool, offered *offeredHeaders) bool {
	asymmetric := v1a || v.config.publicKeyScheme()
	if len(encoded) > maxEncodedSize || !asymmetric && len(encoded) != v.encodedSize {
		return false
	}
	var text [maxEncodedSize]byte // fixed buffers: decoding a string without allocating
	src := text[:copy(text[:], encoded)]
	// Text of the right length can still decode to more than macSize bytes
	// (unpadded base64: 88 characters are 66 bytes), so decode into a buffer
	// sized for the text, not for the signature, then check the size.
	var decoded [maxEncodedSize]byte
	var n int
	var err error
	switch {
	case v1a || v.config.Encoding == EncodingBase64:
		n, err = base64.StdEncoding.Decode(decoded[:], src)
	case v.config.Encoding == EncodingBase64URL:
		n, err = base64.RawURLEncoding.Decode(decoded[:], src)
	default:
		n, err = hex.Decode(decoded[:], src)
	}
	if err != nil || n != v.signatureSize(asymmetric, n) {
		return false
	}
	slot := offered.valid
	copy(offered.decoded[slot][:], decoded[:n])
	offered.size[slot], offered.asymmetric[slot] = uint8(n), asymmetric
	return true
}

// signatureSize is the size a decoded signature of its kind must have;
// an ECDSA signature's DER varies, so any size up to the largest passes.
func (v *Verifier) signatureSize(asymmetric bool, n int) int {
	switch {
	case !asymmetric:
		return v.macSize
	case v.config.Algorithm == AlgorithmECDSAP256 && n >= 8 && n <= maxSignatureSize:
		return n
	default:
		return ed25519.SignatureSize
	}
}

func (v *Verifier) expectedSignature() string {
	switch {
	case len(v.secrets) > 0 || !v.config.publicKeyScheme() && len(v.ed25519) == 0:
		return fmt.Sprintf("%s of %d characters", v.config.Encoding, v.encodedSize)
	case v.config.Algorithm == AlgorithmECDSAP256:
		return "a DER-encoded ECDSA signature in " + v.config.Encoding
	default:
		return "a 64-byte Ed25519 signature in " + v.config.Encoding
	}
}

// matchAny compares each decoded signature, in constant time, with the MAC
// computed under every secret, then checks the rest with every public key.
func (v *Verifier) matchAny(offered *offeredHeaders, body []byte) *Error {
	result := &offered.result
	for index, secret := range v.secrets {
		matched := false
		secret.mac.compute(&v.template, &result.fields, body, func(mac []byte) {
			for i := range offered.valid {
				if !offered.asymmetric[i] && hmac.Equal(mac, offered.decoded[i][:offered.size[i]]) {
					matched = true
				}
			}
		})
		if matched {
			result.secret = index
			return nil
		}
	}
	if len(v.ed25519)+len(v.ecdsa) > 0 && v.matchPublicKeys(offered, body) {
		result.secret = -1
		return nil
	}
	return failure(SignatureMismatch, "signature mismatch: no signature in "+v.signatureSource+" matches the request")
}

var signedMessages = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledMessage is the largest signed message kept for reuse: a large body's copy is made once
// per request (WorkingMemory counts it), not pinned in the pool beyond it.
const maxPooledMessage = 64 << 10

// matchPublicKeys checks the asymmetric signatures offered against every public key. Ed25519 takes
// the signed message in one piece, so it is assembled, in a buffer sized once; ECDSA signs its
// SHA-256, streamed without a copy when there is no Ed25519 key.
func (v *Verifier) matchPublicKeys(offered *offeredHeaders, body []byte) bool {
	var scratch [256]byte
	fields := &offered.result.fields
	var digest [sha256.Size]byte // what ECDSA signs; Ed25519 hashes the message itself
	var message []byte
	if len(v.ed25519) > 0 {
		buffer := signedMessages.Get().(*bytes.Buffer)
		buffer.Reset()
		buffer.Grow(v.template.size(fields, body))
		v.template.writeTo(buffer, scratch[:], fields, body)
		message = buffer.Bytes()
		defer func() {
			if buffer.Cap() <= maxPooledMessage {
				signedMessages.Put(buffer)
			}
		}()
		if len(v.ecdsa) > 0 {
			digest = sha256.Sum256(message)
		}
	} else {
		hash := sha256.New()
		v.template.writeTo(hash, scratch[:], fields, body)
		hash.Sum(digest[:0])
	}
	for i := range offered.valid {
		if !offered.asymmetric[i] {
			continue
		}
		// A copy: handing the array itself to the crypto packages would move
		// every request's offeredHeaders to the heap, HMAC schemes' too.
		signature := bytes.Clone(offered.decoded[i][:offered.size[i]])
		for _, key := range v.ed25519 {
			if ed25519.Verify(key, message, signature) {
				return true
			}
		}
		for _, key := range v.ecdsa {
			if ecdsa.VerifyASN1(key, digest[:], signature) {
				return true
			}
		}
	}
	return false
}

func encodedLen(encoding string, macSize int) int {
	switch encoding {
	case EncodingBase64:
		return base64.StdEncoding.EncodedLen(macSize)
	case EncodingBase64URL:
		return base64.RawURLEncoding.EncodedLen(macSize)
	default:
		return hex.EncodedLen(macSize)
	}
}
