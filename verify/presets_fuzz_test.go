package verify

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// FuzzVerifyMessageURLSigningPresets drives the URL-signing presets (Twilio's {params}, HubSpot's {method},
// Square's {url}) with fuzzed URL, Content-Type and body: VerifyMessage must never panic and
// must fail with a *Error.
func FuzzVerifyMessageURLSigningPresets(f *testing.F) {
	names := []string{"twilio", "hubspot", "square"}
	verifiers := make([]*Verifier, len(names))
	signedAt := time.Unix(1_700_000_000, 0)
	for i, name := range names {
		c := mustPreset(f, name)
		verifiers[i] = mustVerifier(f, c, "review_secret")
		for _, contentType := range []string{formType, "application/json"} {
			m := &Message{Header: http.Header{"Content-Type": {contentType}}, Body: []byte("Body=hi&From=%2B1"),
				Method: "POST", URL: "https://example.com/hook?a=1"}
			if err := SignMessage(c, "review_secret", "", signedAt, m); err != nil {
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
		if err != nil && !errors.As(err, &verr) {
			t.Fatalf("VerifyMessage returned %T %v", err, err)
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
