package verify

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func FuzzParseStripe(f *testing.F) {
	f.Add(vectorFor(f, "stripe").SignatureHeader)
	f.Add("t=1,v1=aa,v1=bb,v0=cc")
	f.Add("t=1,t=2")
	f.Add(" t = 1 , v1=, ,x")
	f.Fuzz(func(t *testing.T, line string) {
		var signatures signatureList
		timestamp, err := parseKeyed(line, stripeItems, &signatures)
		if err != nil {
			return
		}
		for _, signature := range signatures.all() {
			if !strings.Contains(line, "v1="+signature) {
				t.Fatalf("signature %q is not a v1= item of %q", signature, line)
			}
		}
		var rebuilt strings.Builder
		if timestamp != "" {
			rebuilt.WriteString("t=" + timestamp)
		}
		for _, signature := range signatures.all() {
			rebuilt.WriteString(",v1=" + signature)
		}
		var again signatureList
		timestampAgain, err := parseKeyed(rebuilt.String(), stripeItems, &again)
		if err != nil || timestampAgain != timestamp || !slices.Equal(again.all(), signatures.all()) {
			t.Fatalf("%q parsed to (%q, %q) but its rebuild %q to (%q, %q, %v)",
				line, timestamp, signatures.all(), rebuilt.String(), timestampAgain, again.all(), err)
		}
	})
}

func FuzzParsePaddle(f *testing.F) {
	paddle := keyedList{separator: ";", timestampKey: "ts", signatureKey: "h1"}
	f.Add("ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9")
	f.Add("ts=1;h1=aa;h1=bb;ts=1")
	f.Add("ts=1;ts=2")
	f.Fuzz(func(t *testing.T, line string) {
		var signatures signatureList
		timestamp, err := parseKeyed(line, paddle, &signatures)
		if err != nil {
			return
		}
		rebuilt := "ts=" + timestamp
		for _, signature := range signatures.all() {
			if !strings.Contains(line, "h1="+signature) {
				t.Fatalf("signature %q is not an h1= item of %q", signature, line)
			}
			rebuilt += ";h1=" + signature
		}
		var again signatureList
		timestampAgain, err := parseKeyed(rebuilt, paddle, &again)
		if err != nil || timestampAgain != timestamp || !slices.Equal(again.all(), signatures.all()) {
			t.Fatalf("%q parsed to (%q, %q) but its rebuild %q to (%q, %q, %v)", line, timestamp, signatures.all(), rebuilt, timestampAgain, again.all(), err)
		}
	})
}

func FuzzParseRFC3339Timestamp(f *testing.F) {
	f.Add("2023-11-14T22:13:20.000Z")
	f.Add("2023-11-14T22:13:20+00:00")
	f.Add("2023-11-14T22:13:20.123456789-08:00")
	f.Fuzz(func(t *testing.T, raw string) {
		ts, err := parseTimestamp(raw, UnitRFC3339)
		if err != nil {
			return
		}
		again, err := parseTimestamp(formatTimestamp(ts, UnitRFC3339), UnitRFC3339)
		if err != nil || !again.Equal(ts) {
			t.Fatalf("%q parsed to %v, which does not round-trip (%v, %v)", raw, ts, again, err)
		}
	})
}

func FuzzParseStandard(f *testing.F) {
	f.Add(vectorFor(f, "standard").SignatureHeader)
	f.Add("v1,a v1a,b  v2,c\tv1,d,e v1")
	f.Add(strings.Repeat("v1,x ", maxSignatures+1))
	f.Fuzz(func(t *testing.T, list string) {
		var signatures signatureList
		if err := parseStandard(list, true, false, &signatures); err != nil {
			if signatures.count != maxSignatures {
				t.Fatalf("error %v before the list was full", err)
			}
			return
		}
		rebuilt := make([]string, 0, signatures.count)
		for _, signature := range signatures.all() {
			if strings.ContainsAny(signature, " \t") || !strings.Contains(list, "v1,"+signature) {
				t.Fatalf("signature %q is not a v1, entry of %q", signature, list)
			}
			rebuilt = append(rebuilt, "v1,"+signature)
		}
		var again signatureList
		if err := parseStandard(strings.Join(rebuilt, " "), true, false, &again); err != nil || !slices.Equal(again.all(), signatures.all()) {
			t.Fatalf("%q parsed to %q but its rebuild to %q (%v)", list, signatures.all(), again.all(), err)
		}
	})
}

func FuzzParseSingle(f *testing.F) {
	f.Add(vectorFor(f, "github").SignatureHeader, "sha256=")
	f.Add(vectorFor(f, "slack").SignatureHeader, "v0=")
	f.Add(" v0=abc ", "v0=")
	f.Add("abc", "")
	f.Fuzz(func(t *testing.T, line, prefix string) {
		encoded, ok := parseSingle(line, prefix)
		trimmed := strings.TrimSpace(line)
		if ok != strings.HasPrefix(trimmed, prefix) {
			t.Fatalf("parseSingle(%q, %q) ok = %v", line, prefix, ok)
		}
		if ok && prefix+encoded != trimmed {
			t.Fatalf("parseSingle(%q, %q) = %q, which does not rebuild the line", line, prefix, encoded)
		}
	})
}

func FuzzParseTimestamp(f *testing.F) {
	for _, vec := range loadVectors(f) {
		f.Add(vec.Timestamp, false)
	}
	f.Add("1700000000123", true)
	f.Add("-1", false)
	f.Add("00042", true)
	f.Add("9223372036854775808", false)
	f.Fuzz(func(t *testing.T, raw string, milliseconds bool) {
		unit := UnitSeconds
		if milliseconds {
			unit = UnitMilliseconds
		}
		ts, err := parseTimestamp(raw, unit)
		if err != nil {
			return
		}
		value, convErr := strconv.ParseUint(raw, 10, 63)
		if convErr != nil || strings.Trim(raw, "0123456789") != "" {
			t.Fatalf("parseTimestamp accepted %q, which is not a plain non-negative integer", raw)
		}
		got := ts.Unix()
		if milliseconds {
			got = ts.UnixMilli()
		}
		if got != int64(value) || formatTimestamp(ts, unit) != raw {
			t.Fatalf("%q (%s) parsed to %v, which does not round-trip", raw, unit, ts)
		}
	})
}

// FuzzVerify drives whole requests through every header parser at once, for
// every preset's published vector and every algorithm × encoding × format:
// whatever the headers, Verify must return nil or a *Error that names a kind
// and reveals no secret, and CheckHeaders must never refuse what Verify
// accepts. The target index picks the scheme.
func FuzzVerify(f *testing.F) {
	type target struct {
		config   Config
		secret   string
		verifier *Verifier
		now      time.Time
	}
	var targets []target
	seed := func(c Config, secret string, h http.Header, body []byte, now time.Time) {
		index := uint8(len(targets))
		targets = append(targets, target{c, secret, mustVerifier(f, c, secret), now})
		signature := h.Get(c.signatureHeaders()[0])
		f.Add(index, signature, h.Get(c.TimestampHeader), h.Get(c.IDHeader), body)
		// The same text without its padding: the right length, more bytes.
		f.Add(index, strings.ReplaceAll(signature, "=", "A"), h.Get(c.TimestampHeader), h.Get(c.IDHeader), body)
	}
	for _, vec := range loadVectors(f) {
		c, h, body, now := vec.request(f)
		if vec.Scheme == "stripe" {
			f.Add(uint8(len(targets)), "t=1,v1=zz,v0=00", "", "", []byte("{}"))
		}
		seed(c, vec.Secret, h, body, now)
	}
	signedAt := time.Unix(1_700_000_000, 0)
	matrix := schemeMatrix()
	for _, name := range slices.Sorted(maps.Keys(matrix)) {
		c := matrix[name]
		body := []byte(`{"id":"evt_1"}`)
		seed(c, secretFor(c), mustSign(f, c, secretFor(c), "evt_1", signedAt, body), body, signedAt)
	}
	for _, name := range PresetNames() {
		if c := mustPreset(f, name); name != "generic" {
			body := []byte(`{"id":"evt_1"}`)
			seed(c, secretFor(c), mustSign(f, c, secretFor(c), "evt_1", signedAt, body), body, signedAt)
		}
	}
	f.Fuzz(func(t *testing.T, index uint8, signature, timestamp, id string, body []byte) {
		target := targets[int(index)%len(targets)]
		h := http.Header{}
		h.Set(target.config.signatureHeaders()[0], signature)
		if target.config.TimestampHeader != "" {
			h.Set(target.config.TimestampHeader, timestamp)
		}
		if target.config.IDHeader != "" {
			h.Set(target.config.IDHeader, id)
		}
		now := target.now.Add(time.Second)
		_, err := target.verifier.Verify(h, body, now)
		headerErr := target.verifier.CheckHeaders(h, now)
		if err == nil {
			if headerErr != nil {
				t.Fatalf("CheckHeaders refused (%v) a request Verify accepts", headerErr)
			}
			return
		}
		var verr *Error
		if !errors.As(err, &verr) || verr.Kind.String() == "unknown verification error" || verr.Reason == "" {
			t.Fatalf("Verify returned %#v", err)
		}
		if strings.Contains(verr.Reason, target.secret) {
			t.Fatalf("error %q reveals the secret", verr.Reason)
		}
	})
}

// FuzzVerifyMessageURLSigningPresets drives the URL-signing presets (Twilio's {params}, HubSpot's {method},
// Square's {url}) with fuzzed URL, Content-Type, body, signature and timestamp: VerifyMessage
// must never panic and must fail with a *Error, unless the message is one the seeds signed, and
// then the same message with another signature (or HubSpot's and Square's with another body)
// must fail.
func FuzzVerifyMessageURLSigningPresets(f *testing.F) {
	names := []string{"twilio", "hubspot", "square"}
	verifiers := make([]*Verifier, len(names))
	signedAt := time.Unix(1_700_000_000, 0)
	for i, name := range names {
		c := mustPreset(f, name)
		verifiers[i] = mustVerifier(f, c, "fuzzed_secret")
		for _, contentType := range []string{formType, "application/json"} {
			m := &Message{Header: http.Header{"Content-Type": {contentType}}, Body: []byte("Body=hi&From=%2B1"),
				Method: "POST", URL: "https://example.com/hook?a=1"}
			if err := SignMessage(c, "fuzzed_secret", "", signedAt, m); err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), m.Header.Get(c.SignatureHeader), m.Header.Get(c.TimestampHeader), contentType, m.URL, m.Body)
		}
	}
	f.Fuzz(func(t *testing.T, index uint8, signature, timestamp, contentType, url string, body []byte) {
		i := int(index) % len(names)
		c := verifiers[i].Config()
		h := http.Header{"Content-Type": {contentType}}
		h.Set(c.SignatureHeader, signature)
		if c.TimestampHeader != "" {
			h.Set(c.TimestampHeader, timestamp)
		}
		_, err := verifiers[i].VerifyMessage(&Message{Header: h, Body: body, Method: "POST", URL: url}, signedAt)
		var verr *Error
		if err != nil {
			if !errors.As(err, &verr) {
				t.Fatalf("VerifyMessage returned %T %v", err, err)
			}
			return
		}
		// The fuzzer does not know the secret: what verifies is a seed's signed message, and
		// another signature, or (for the presets that sign the raw body) another body, must not.
		other := []byte(signature)
		if len(other) == 0 {
			t.Fatalf("%s accepted an empty signature", names[i])
		}
		if other[0] = 'A'; signature[0] == 'A' {
			other[0] = 'B'
		}
		h.Set(c.SignatureHeader, string(other))
		if _, err := verifiers[i].VerifyMessage(&Message{Header: h, Body: body, Method: "POST", URL: url}, signedAt); err == nil {
			t.Fatalf("%s accepted signature %q and also %q for the same message", names[i], signature, other)
		}
		h.Set(c.SignatureHeader, signature)
		if names[i] != "twilio" {
			longer := append(slices.Clip(body), 'x')
			if _, err := verifiers[i].VerifyMessage(&Message{Header: h, Body: longer, Method: "POST", URL: url}, signedAt); err == nil {
				t.Fatalf("%s accepted signature %q for body %q and also for %q", names[i], signature, body, longer)
			}
		}
	})
}

// FuzzHandshakePresets feeds every handshake preset arbitrary bodies, signed: Handshake must never
// panic, and an answer must be a 2xx.
func FuzzHandshakePresets(f *testing.F) {
	var verifiers []*Verifier
	var configs []Config
	for _, name := range []string{"slack", "zoom", "discord", "twitch", "line"} {
		configs = append(configs, mustPreset(f, name))
		verifiers = append(verifiers, mustVerifier(f, mustPreset(f, name), secretFor(mustPreset(f, name))))
	}
	for i, body := range []string{`{"type":"url_verification","challenge":"c"}`,
		`{"event":"endpoint.url_validation","payload":{"plainToken":"p"}}`, `{"type":1}`,
		`{"challenge":"c"}`, `{"destination":"U1","events":[]}`} {
		f.Add(uint8(i), "webhook_callback_verification", []byte(body))
	}
	f.Fuzz(func(t *testing.T, index uint8, messageType string, body []byte) {
		v, c := verifiers[int(index)%len(verifiers)], configs[int(index)%len(configs)]
		now := time.Now()
		m := &Message{Header: mustSign(t, c, secretFor(c), "msg_1", now, body), Body: body}
		m.Header.Set("Twitch-Eventsub-Message-Type", messageType)
		result, err := v.VerifyMessage(m, now)
		if err != nil {
			t.Fatalf("a signed body did not verify: %v", err)
		}
		if reply, ok := v.Handshake(result, m); ok && (reply.Status < 200 || reply.Status > 299) {
			t.Fatalf("handshake answers %d", reply.Status)
		}
	})
}
