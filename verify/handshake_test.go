package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"
)

// TestHandshakes: each provider's endpoint check, once verified, gets the answer the provider
// demands, and its ordinary events get none (they are forwarded).
func TestHandshakes(t *testing.T) {
	zoomToken := func(secret string) string {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte("qgg8vlvZRS6UYooatFL8Aw"))
		return hex.EncodeToString(mac.Sum(nil))
	}
	cases := []struct {
		preset, body, messageType string
		wantOK                    bool
		status                    int
		contentType, reply        string
	}{
		{"slack", `{"token":"x","challenge":"3eZbrw1aB","type":"url_verification"}`, "", true, 200, "application/json", `{"challenge":"3eZbrw1aB"}`},
		{"slack", `{"type":"event_callback","event_id":"Ev1","event":{"text":"url_verification"}}`, "", false, 0, "", ""},
		{"zoom", `{"event":"endpoint.url_validation","payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"}}`, "", true, 200, "application/json",
			`{"encryptedToken":"` + zoomToken("round-trip-secret") + `","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`},
		{"zoom", `{"event":"meeting.started","payload":{}}`, "", false, 0, "", ""},
		{"discord", `{"type":1,"id":"1","application_id":"2","token":"t","version":1}`, "", true, 200, "application/json", `{"type":1}`},
		{"discord", `{"version":1,"application_id":"2","type":0}`, "", true, 204, "", ""},
		{"discord", `{"version":1,"application_id":"2","type":1,"event":{"type":"APPLICATION_AUTHORIZED"}}`, "", false, 0, "", ""},
		{"discord", `{"type":2,"id":"3","data":{"name":"cmd"}}`, "", false, 0, "", ""},
		{"twitch", `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{}}`, "webhook_callback_verification", true, 200, "text/plain; charset=utf-8", "pogchamp-kappa-360noscope-vohiyo"},
		{"twitch", `{"challenge":"x","subscription":{}}`, "notification", false, 0, "", ""},
		{"line", `{"destination":"U1","events":[]}`, "", true, 200, "application/json", `{}`},
		{"line", `{"destination":"U1","events":[{"webhookEventId":"01H"}]}`, "", false, 0, "", ""},
		{"github", `{"type":"url_verification","challenge":"c"}`, "", false, 0, "", ""},
	}
	signedAt := time.Now()
	for _, tc := range cases {
		t.Run(tc.preset+"/"+tc.body, func(t *testing.T) {
			c := mustPreset(t, tc.preset)
			secret := secretFor(c)
			h := mustSign(t, c, secret, "msg_1", signedAt, []byte(tc.body))
			if tc.messageType != "" {
				h.Set("Twitch-Eventsub-Message-Type", tc.messageType)
			}
			v := mustVerifier(t, c, secret)
			m := &Message{Header: h, Body: []byte(tc.body)}
			result, err := v.VerifyMessage(m, signedAt)
			if err != nil {
				t.Fatal(err)
			}
			reply, ok := v.Handshake(result, m)
			if ok != tc.wantOK || reply.Status != tc.status || reply.ContentType != tc.contentType || string(reply.Body) != tc.reply {
				t.Fatalf("Handshake = %d %q %q, %v; want %d %q %q, %v", reply.Status, reply.ContentType, reply.Body, ok,
					tc.status, tc.contentType, tc.reply, tc.wantOK)
			}
		})
	}
}

// TestZoomHandshakeAnswersUnderTheSecretThatVerified: during a rotation, the encryptedToken is
// made with the secret Zoom signed with, not the first one configured.
func TestZoomHandshakeAnswersUnderTheSecretThatVerified(t *testing.T) {
	c := mustPreset(t, "zoom")
	body := []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"P"}}`)
	h := mustSign(t, c, "new-secret", "", time.Now(), body)
	v := mustVerifier(t, c, "old-secret", "new-secret")
	m := &Message{Header: h, Body: body}
	result, err := v.VerifyMessage(m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := v.Handshake(result, m)
	mac := hmac.New(sha256.New, []byte("new-secret"))
	mac.Write([]byte("P"))
	if want := `{"encryptedToken":"` + hex.EncodeToString(mac.Sum(nil)) + `","plainToken":"P"}`; string(reply.Body) != want {
		t.Fatalf("reply %s, want %s", reply.Body, want)
	}
}

// TestHandshakeAnswersNothingForAResultVerifyDidNotReturn: a caller that ignores Verify's error
// and hands Handshake the zero Result a failure returns gets no reply, for any provider's check:
// above all no Zoom encryptedToken, a MAC under the secret of a token the sender chose.
func TestHandshakeAnswersNothingForAResultVerifyDidNotReturn(t *testing.T) {
	checks := map[string]string{
		"zoom":    `{"event":"endpoint.url_validation","payload":{"plainToken":"attacker-chosen"}}`,
		"slack":   `{"type":"url_verification","challenge":"c"}`,
		"discord": `{"type":1}`,
		"twitch":  `{"challenge":"c"}`,
		"line":    `{"destination":"U1","events":[]}`,
	}
	for preset, body := range checks {
		t.Run(preset, func(t *testing.T) {
			c := mustPreset(t, preset)
			v := mustVerifier(t, c, secretFor(c))
			h := mustSign(t, c, secretFor(c), "msg_1", time.Now(), []byte(body))
			h.Set("Twitch-Eventsub-Message-Type", "webhook_callback_verification")
			m := &Message{Header: h, Body: []byte(body + " ")} // still the check, no longer what was signed
			result, err := v.VerifyMessage(m, time.Now())
			if err == nil {
				t.Fatal("a body other than the signed one verified")
			}
			if reply, ok := v.Handshake(result, m); ok {
				t.Fatalf("the Result of a failed Verify got the reply %d %s", reply.Status, reply.Body)
			}
			if reply, ok := v.Handshake(Result{}, m); ok {
				t.Fatalf("the zero Result got the reply %d %s", reply.Status, reply.Body)
			}
		})
	}
}
