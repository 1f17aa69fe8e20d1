package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
	"time"
)

// BenchmarkVerify measures one successful verification of a 1 KiB body for
// every preset and both seed formats.
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
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(h, body, signedAt); err != nil {
					b.Fatal(err)
				}
			}
		})
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
