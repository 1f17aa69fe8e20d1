package verify

import (
	"bytes"
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
