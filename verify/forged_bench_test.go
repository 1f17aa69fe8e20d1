package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkForgedAsymmetricSignatures is the cost of one unauthenticated request to a public-key
// preset that carries maxSignatures well-formed but false signatures, against one and two
// configured keys: what anyone can make the gateway spend per request.
func BenchmarkForgedAsymmetricSignatures(b *testing.B) {
	body := []byte(`{"id":"evt_1"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	order := elliptic.P256().Params().N
	for _, name := range []string{"discord", "sendgrid", "standard"} {
		for _, keyCount := range []int{1, 2} {
			for _, signatures := range []int{1, maxSignatures} {
				b.Run(name+"/keys="+strconv.Itoa(keyCount)+"/signatures="+strconv.Itoa(signatures), func(b *testing.B) {
					c := mustPreset(b, name)
					var keys []string
					for range keyCount {
						switch name {
						case "sendgrid":
							private, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
							der, _ := x509.MarshalPKIXPublicKey(&private.PublicKey)
							keys = append(keys, base64.StdEncoding.EncodeToString(der))
						case "discord":
							keys = append(keys, hex.EncodeToString(testEd25519.Public().(ed25519.PublicKey)))
						default:
							keys = append(keys, "whpk_"+base64.StdEncoding.EncodeToString(testEd25519.Public().(ed25519.PublicKey)))
						}
					}
					v, err := NewFromKeys(c, Keys{PublicKeys: keys})
					if err != nil {
						b.Fatal(err)
					}
					h := http.Header{}
					h.Set(c.TimestampHeader, ts)
					h.Set(c.IDHeader, "msg_1")
					var entries []string
					for range signatures {
						var signature []byte
						if name == "sendgrid" {
							r, _ := rand.Int(rand.Reader, order)
							s, _ := rand.Int(rand.Reader, order)
							signature = derSignature(r, s)
						} else {
							signature = make([]byte, 64)
							rand.Read(signature)
							signature[63] &= 0x0f // a canonical S, so Verify does the whole work
						}
						switch name {
						case "sendgrid":
							h.Add(c.SignatureHeader, base64.StdEncoding.EncodeToString(signature))
						case "discord":
							h.Add(c.SignatureHeader, hex.EncodeToString(signature))
						default:
							entries = append(entries, "v1a,"+base64.StdEncoding.EncodeToString(signature))
						}
					}
					if len(entries) > 0 {
						h.Set(c.SignatureHeader, strings.Join(entries, " "))
					}
					b.ReportAllocs()
					for b.Loop() {
						if _, err := v.Verify(h, body, now); kindOf(b, err) != SignatureMismatch {
							b.Fatalf("got %v, want a signature mismatch", err)
						}
					}
				})
			}
		}
	}
}

// derSignature encodes r and s as an ASN.1 SEQUENCE of two INTEGERs.
func derSignature(r, s *big.Int) []byte {
	integer := func(n *big.Int) []byte {
		bytes := n.Bytes()
		if len(bytes) == 0 || bytes[0]&0x80 != 0 {
			bytes = append([]byte{0}, bytes...)
		}
		return append([]byte{0x02, byte(len(bytes))}, bytes...)
	}
	content := append(integer(r), integer(s)...)
	return append([]byte{0x30, byte(len(content))}, content...)
}
