package verify

import (
	"net/http"
	"testing"
	"time"
)

type headerCase struct {
	name   string
	header http.Header
	now    time.Time
	want   ErrorKind
}

// TestCheckHeadersRefusesWhatCanNeverVerify: from the headers alone, before any body, every scheme
// refuses a request Verify would refuse whatever its body, with the kind Verify gives; and it lets
// through both the genuine headers and a well-formed forgery, which only the body can expose.
func TestCheckHeadersRefusesWhatCanNeverVerify(t *testing.T) {
	body := []byte(`{"type":"test"}`)
	signedAt := time.Unix(1_700_000_000, 0)
	for name, c := range roundTripConfigs(t) {
		t.Run(name, func(t *testing.T) {
			secret := secretFor(c)
			v := mustVerifier(t, c, secret)
			c = v.Config()
			genuine := func() http.Header { return mustSign(t, c, secret, "evt_1", signedAt, body) }
			garbled := genuine()
			header := c.signatureHeaders()[0]
			value := garbled.Get(header)
			garbled.Set(header, value[:len(value)-8]+"@@@@@@@@")
			cut := genuine()
			cut.Set(header, value[:len(value)-2])
			missing := genuine()
			missing.Del(header)

			cases := []headerCase{
				{"genuine", genuine(), signedAt, 0},
				{"well-formed forgery", mustSign(t, c, secret, "evt_1", signedAt, []byte(`{"type":"forged"}`)), signedAt, 0},
				{"no signature header", missing, signedAt, MissingSignature},
				{"signature not in the encoding", garbled, signedAt, MalformedSignature},
				{"signature of the wrong length", cut, signedAt, MalformedSignature},
			}
			if c.hasTimestamp() {
				cases = append(cases,
					headerCase{"timestamp too old", genuine(), signedAt.Add(c.Tolerance + time.Second), StaleTimestamp},
					headerCase{"timestamp in the future", genuine(), signedAt.Add(-c.Tolerance - time.Second), FutureTimestamp},
				)
			}
			if c.TimestampHeader != "" {
				noTimestamp := genuine()
				noTimestamp.Del(c.TimestampHeader)
				cases = append(cases, headerCase{"no timestamp header", noTimestamp, signedAt, MissingTimestamp})
			}
			for _, tc := range cases {
				got := kindOf(t, v.CheckHeaders(tc.header, tc.now))
				if got != tc.want {
					t.Errorf("%s: CheckHeaders gave %v, want %v", tc.name, got, tc.want)
				}
				if tc.want == 0 {
					continue
				}
				if _, err := v.Verify(tc.header, body, tc.now); kindOf(t, err) != tc.want {
					t.Errorf("%s: Verify gave %v, CheckHeaders %v", tc.name, err, tc.want)
				}
			}
		})
	}
}

// BenchmarkCheckHeaders measures the header-only check a request pays before its body is read.
func BenchmarkCheckHeaders(b *testing.B) {
	c := mustPreset(b, "standard")
	secret := secretFor(c)
	signedAt := time.Unix(1_700_000_000, 0)
	h := mustSign(b, c, secret, "evt_0123456789", signedAt, []byte("{}"))
	v := mustVerifier(b, c, secret)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.CheckHeaders(h, signedAt); err != nil {
			b.Fatal(err)
		}
	}
}
