package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
)

// decodeSecret turns a configured secret into HMAC key bytes. position is
// the 1-based index used in errors; errors never include the secret itself.
func decodeSecret(secret, encoding string, position int) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("secret #%d is empty", position)
	}
	switch encoding {
	case SecretRaw:
		return []byte(secret), nil
	case SecretBase64:
		return decodeBase64Secret(secret, position, "")
	case SecretWhsec:
		return decodeBase64Secret(strings.TrimPrefix(secret, "whsec_"), position, " after the whsec_ prefix")
	case SecretHex:
		key, err := hex.DecodeString(secret)
		if err != nil || len(key) == 0 {
			return nil, fmt.Errorf("secret #%d is not valid hex", position)
		}
		return key, nil
	default:
		return nil, fmt.Errorf("unknown secret encoding %q", encoding)
	}
}

func decodeBase64Secret(encoded string, position int, where string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("secret #%d is not valid standard base64%s", position, where)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("secret #%d decodes to an empty key", position)
	}
	return key, nil
}

// decodeEd25519PublicKey reads a 32-byte Ed25519 public key written as
// "whpk_" + base64 (Standard Webhooks), 64 hex digits (Discord) or base64.
func decodeEd25519PublicKey(text string, position int) (ed25519.PublicKey, error) {
	text = strings.TrimSpace(text)
	var key []byte
	var err error
	switch {
	case strings.HasPrefix(text, "whpk_"):
		key, err = base64.StdEncoding.DecodeString(text[len("whpk_"):])
	case len(text) == 2*ed25519.PublicKeySize:
		key, err = hex.DecodeString(text)
	default:
		key, err = base64.StdEncoding.DecodeString(text)
	}
	if err != nil || len(key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key #%d is not an Ed25519 public key: expected 32 bytes as whpk_<base64>, 64 hex digits or base64", position)
	}
	return ed25519.PublicKey(key), nil
}

// decodeECDSAPublicKey reads a P-256 public key as base64 of its DER
// SubjectPublicKeyInfo (SendGrid's form) or as PEM.
func decodeECDSAPublicKey(text string, position int) (*ecdsa.PublicKey, error) {
	der, err := pemOrBase64(text, "PUBLIC KEY")
	var parsed any
	if err == nil {
		parsed, err = x509.ParsePKIXPublicKey(der)
	}
	key, ok := parsed.(*ecdsa.PublicKey)
	if err != nil || !ok || key.Curve.Params().Name != "P-256" {
		return nil, fmt.Errorf("public key #%d is not a P-256 ECDSA public key: expected base64 of its DER SubjectPublicKeyInfo, or PEM", position)
	}
	return key, nil
}

// decodeEd25519PrivateKey reads a signing key as "whsk_" + base64, hex or
// base64 of its 32-byte seed or 64-byte seed and public key.
func decodeEd25519PrivateKey(text string) (ed25519.PrivateKey, error) {
	text = strings.TrimSpace(text)
	var key []byte
	var err error
	switch {
	case strings.HasPrefix(text, "whsk_"):
		key, err = base64.StdEncoding.DecodeString(text[len("whsk_"):])
	case len(text) == 2*ed25519.SeedSize || len(text) == 2*ed25519.PrivateKeySize:
		key, err = hex.DecodeString(text)
	default:
		key, err = base64.StdEncoding.DecodeString(text)
	}
	switch {
	case err != nil:
	case len(key) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(key), nil
	case len(key) == ed25519.PrivateKeySize:
		return ed25519.NewKeyFromSeed(key[:ed25519.SeedSize]), nil
	}
	return nil, fmt.Errorf("the signing key is not an Ed25519 private key: expected its seed as whsk_<base64>, hex or base64")
}

// decodeECDSAPrivateKey reads a P-256 signing key as base64 or PEM of its
// PKCS #8 or SEC 1 DER.
func decodeECDSAPrivateKey(text string) (*ecdsa.PrivateKey, error) {
	der, err := pemOrBase64(text, "")
	if err == nil {
		if parsed, err := x509.ParsePKCS8PrivateKey(der); err == nil {
			if key, ok := parsed.(*ecdsa.PrivateKey); ok {
				return key, nil
			}
		}
		if key, err := x509.ParseECPrivateKey(der); err == nil {
			return key, nil
		}
	}
	return nil, fmt.Errorf("the signing key is not a P-256 ECDSA private key: expected base64 or PEM of its PKCS #8 or SEC 1 DER")
}

// pemOrBase64 returns the DER inside a PEM block (of blockType, if not "") or base64 text.
func pemOrBase64(text, blockType string) ([]byte, error) {
	text = strings.TrimSpace(text)
	if block, _ := pem.Decode([]byte(text)); block != nil {
		if blockType != "" && block.Type != blockType {
			return nil, fmt.Errorf("PEM block %q is not %q", block.Type, blockType)
		}
		return block.Bytes, nil
	}
	return base64.StdEncoding.DecodeString(text)
}
