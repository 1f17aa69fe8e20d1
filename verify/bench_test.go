package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerify measures one successful verification of a 1 KiB body for
// every preset and both seed formats, and what of it is hookgate's own work (see reportOverhead).
func BenchmarkVerify(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
	signedAt := time.Unix(1_700_000_000, 0)
	configs := seedConfigs()
	for _, name := range PresetNames() {
		c, _ := Preset(name)
		if name == "generic" {
			c.SignatureHeader = "X-Signature"
		}
		configs[name] = c
	}
	for _, name := range append(PresetNames(), "seed_task_callback", "seed_platform") {
		c := configs[name]
		b.Run(name, func(b *testing.B) {
			secret := secretFor(c)
			h := mustSign(b, c, secret, "evt_0123456789", signedAt, body)
			v := mustVerifier(b, c, secret)
			benchmarkVerify(b, v, secret, &Message{Header: h, Body: body}, signedAt)
		})
	}
}

// BenchmarkVerifyTwilio is Twilio as it calls: an SMS webhook's form of 21 parameters, and a
// 1 KiB JSON body whose SHA-256 rides in the signed URL.
func BenchmarkVerifyTwilio(b *testing.B) {
	c := mustPreset(b, "twilio")
	v := mustVerifier(b, c, "twilio_token")
	for _, request := range []struct{ name, contentType, body string }{
		{"sms-form", formType, "ToCountry=US&ToState=CA&SmsMessageSid=SM0123456789abcdef0123456789abcdef&NumMedia=0" +
			"&ToCity=SAN+FRANCISCO&FromZip=94105&SmsSid=SM0123456789abcdef0123456789abcdef&FromState=CA" +
			"&SmsStatus=received&FromCity=SAN+FRANCISCO&Body=Hello+from+hookgate%21+caf%C3%A9+%F0%9F%91%8B" +
			"&FromCountry=US&To=%2B14155550100&MessagingServiceSid=MG0123456789abcdef0123456789abcdef" +
			"&ToZip=94105&NumSegments=1&MessageSid=SM0123456789abcdef0123456789abcdef" +
			"&AccountSid=AC0123456789abcdef0123456789abcdef&From=%2B14155550199&ApiVersion=2010-04-01&ReferralNumMedia=0"},
		{"json-1KiB", "application/json", `{"data":"` + string(bytes.Repeat([]byte("0123456789abcdef"), 63)) + `0123456"}`},
	} {
		b.Run(request.name, func(b *testing.B) {
			m := &Message{Header: http.Header{"Content-Type": {request.contentType}}, Body: []byte(request.body),
				Method: http.MethodPost, URL: "https://example.com/twilio/sms?tenant=acme"}
			if err := SignMessage(c, "twilio_token", "", time.Time{}, m); err != nil {
				b.Fatal(err)
			}
			benchmarkVerify(b, v, "twilio_token", m, time.Now())
		})
	}
}

// benchmarkVerify measures v.VerifyMessage(m). Then, untimed, it alternates blocks of
// verifications with blocks of the bare cryptography over the same signed bytes, so both see
// the same load on a shared machine, and reports the latter (crypto-ns/op) and the difference
// (overhead-ns/op): what hookgate adds on top of the hash, whatever the CPU's hash speed.
func benchmarkVerify(b *testing.B, v *Verifier, key string, m *Message, now time.Time) {
	result, err := v.VerifyMessage(m, now)
	if err != nil {
		b.Fatal(err)
	}
	crypto := cryptoFloor(b, v, key, m.Body, result)
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.VerifyMessage(m, now); err != nil {
			b.Fatal(err)
		}
	}
	const block, blocks = 100, 50
	var verifying, hashing time.Duration
	for range blocks {
		start := time.Now()
		for range block {
			v.VerifyMessage(m, now)
		}
		verifying += time.Since(start)
		start = time.Now()
		for range block {
			crypto()
		}
		hashing += time.Since(start)
	}
	b.ReportMetric(float64(hashing.Nanoseconds())/(block*blocks), "crypto-ns/op")
	b.ReportMetric(float64((verifying-hashing).Nanoseconds())/(block*blocks), "overhead-ns/op")
}

// cryptoFloor returns the least any verifier must compute for this request: the scheme's
// primitive (a pre-keyed HMAC, Ed25519 or ECDSA P-256) over the signed bytes, and the SHA-256
// of a body whose hash the signed URL carries. What VerifyMessage costs beyond it is
// hookgate's: reading headers, decoding and comparing signatures, building the signed bytes.
func cryptoFloor(b *testing.B, v *Verifier, key string, body []byte, result Result) func() {
	var signed bytes.Buffer
	var scratch [256]byte
	v.template.writeTo(&signed, scratch[:], &result.fields, body)
	message := signed.Bytes()
	switch {
	case len(v.ecdsa) > 0:
		private, err := decodeECDSAPrivateKey(key)
		if err != nil {
			b.Fatal(err)
		}
		digest := sha256.Sum256(message)
		signature, _ := ecdsa.SignASN1(rand.Reader, private, digest[:])
		return func() {
			digest := sha256.Sum256(message)
			ecdsa.VerifyASN1(&private.PublicKey, digest[:], signature)
		}
	case len(v.ed25519) > 0:
		private, err := decodeEd25519PrivateKey(key)
		if err != nil {
			b.Fatal(err)
		}
		signature, public := ed25519.Sign(private, message), private.Public().(ed25519.PublicKey)
		return func() { ed25519.Verify(public, message, signature) }
	}
	newHash, size := hashFor(v.config.Algorithm)
	mac := hmac.New(newHash, v.secrets[0].key)
	sum := make([]byte, 0, size)
	hashesBody := v.template.usesParams && !result.fields.formBody && len(body) > 0
	return func() {
		if hashesBody {
			sha256.Sum256(body)
		}
		mac.Reset()
		mac.Write(message)
		mac.Sum(sum[:0])
	}
}

// BenchmarkHMACFloor is the bare HMAC-SHA256 of the same 1 KiB body with crypto/hmac: what
// BenchmarkVerify's HMAC presets cost beyond it is hookgate's own work.
func BenchmarkHMACFloor(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 64)
	mac := hmac.New(sha256.New, []byte("round-trip-secret"))
	var sum [sha256.Size]byte
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		mac.Reset()
		mac.Write(body)
		mac.Sum(sum[:0])
	}
}

// BenchmarkTwilioForgedForm is what anyone can make the gateway spend on one forged Twilio
// request: a form of the most pairs url.ParseQuery reads (each a distinct name, shuffled), which is parsed, sorted and hashed before its signature fails, and one pair more,
// which is refused before any is decoded.
func BenchmarkTwilioForgedForm(b *testing.B) {
	c := mustPreset(b, "twilio")
	v := mustVerifier(b, c, "twilio_token")
	for _, pairs := range []int{maxQueryParams, maxQueryParams + 1} {
		var body bytes.Buffer
		for i := range pairs {
			fmt.Fprintf(&body, "p%05d=v&", i*7919%pairs) // a prime stride: no order to exploit
		}
		body.Truncate(body.Len() - 1)
		m := &Message{Header: http.Header{"Content-Type": {formType}, c.SignatureHeader: {"AAAAAAAAAAAAAAAAAAAAAAAAAAA="}},
			Body: body.Bytes(), Method: http.MethodPost, URL: "https://example.com:8443/twilio"}
		b.Run(fmt.Sprintf("pairs=%d", pairs), func(b *testing.B) {
			b.SetBytes(int64(body.Len()))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.VerifyMessage(m, time.Now()); err == nil {
					b.Fatal("a forged request passes")
				}
			}
		})
	}
}

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
