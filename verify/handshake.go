package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// Reply is the answer to a provider's endpoint check.
type Reply struct {
	Status      int
	ContentType string // "" when there is no body
	Body        []byte
}

// Handshake answers, for a verified request, the endpoint check of the
// scheme's provider when the request is one: Slack's url_verification,
// Zoom's endpoint.url_validation, Discord's PING, Twitch's
// webhook_callback_verification, LINE's empty verification batch. Such a
// request is no event: the receiver answers it and forwards nothing. ok is
// false for every other request. result must be what Verify returned for m: a Result
// no successful Verify returned, such as the zero one a failure comes with, gets no
// reply, so a caller that ignores Verify's error cannot have Zoom's answer, a MAC
// under the secret, made for any token.
func (v *Verifier) Handshake(result Result, m *Message) (reply Reply, ok bool) {
	if !result.verified {
		return Reply{}, false
	}
	switch v.config.Handshake {
	case HandshakeSlack:
		return slackChallenge(m.Body)
	case HandshakeZoom:
		return v.zoomValidation(result, m.Body)
	case HandshakeDiscord:
		return discordPing(m.Body)
	case HandshakeTwitch:
		return twitchChallenge(m)
	case HandshakeLine:
		return lineVerification(m.Body)
	}
	return Reply{}, false
}

// mentions is a cheap pre-check so events are not JSON-decoded twice.
func mentions(body []byte, word string) bool { return bytes.Contains(body, []byte(word)) }

func jsonReply(value any) (Reply, bool) {
	body, err := json.Marshal(value)
	if err != nil {
		return Reply{}, false
	}
	return Reply{Status: http.StatusOK, ContentType: "application/json", Body: body}, true
}

// slackChallenge echoes the challenge of {"type":"url_verification","challenge":C}.
func slackChallenge(body []byte) (Reply, bool) {
	if !mentions(body, "url_verification") {
		return Reply{}, false
	}
	var check struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &check) != nil || check.Type != "url_verification" {
		return Reply{}, false
	}
	return jsonReply(map[string]string{"challenge": check.Challenge})
}

// zoomValidation answers {"event":"endpoint.url_validation","payload":{"plainToken":P}} with P and
// its HMAC-SHA256 in hex under the secret that verified the request.
func (v *Verifier) zoomValidation(result Result, body []byte) (Reply, bool) {
	if !mentions(body, "endpoint.url_validation") || result.secret < 0 || result.secret >= len(v.secrets) {
		return Reply{}, false
	}
	var check struct {
		Event   string `json:"event"`
		Payload struct {
			PlainToken string `json:"plainToken"`
		} `json:"payload"`
	}
	if json.Unmarshal(body, &check) != nil || check.Event != "endpoint.url_validation" {
		return Reply{}, false
	}
	mac := hmac.New(sha256.New, v.secrets[result.secret].key)
	mac.Write([]byte(check.Payload.PlainToken))
	return jsonReply(map[string]string{
		"plainToken":     check.Payload.PlainToken,
		"encryptedToken": hex.EncodeToString(mac.Sum(nil)),
	})
}

// discordPing answers an interaction PING ({"type":1}, no "event") with {"type":1}, and a webhook
// event PING ({"type":0}) with 204. A webhook event proper is also type 1, but carries "event".
func discordPing(body []byte) (Reply, bool) {
	var check struct {
		Type  *int            `json:"type"`
		Event json.RawMessage `json:"event"`
	}
	if len(body) > 4096 || json.Unmarshal(body, &check) != nil || check.Type == nil {
		return Reply{}, false // a PING is small; events are forwarded
	}
	switch {
	case *check.Type == 1 && check.Event == nil:
		return jsonReply(map[string]int{"type": 1})
	case *check.Type == 0:
		return Reply{Status: http.StatusNoContent}, true
	}
	return Reply{}, false
}

// twitchChallenge answers a webhook_callback_verification message with its challenge, as text.
func twitchChallenge(m *Message) (Reply, bool) {
	if m.Header.Get("Twitch-Eventsub-Message-Type") != "webhook_callback_verification" {
		return Reply{}, false
	}
	var check struct {
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(m.Body, &check) != nil || check.Challenge == "" {
		return Reply{}, false
	}
	return Reply{Status: http.StatusOK, ContentType: "text/plain; charset=utf-8", Body: []byte(check.Challenge)}, true
}

// lineVerification answers the batch without events that LINE's console sends to check an endpoint.
func lineVerification(body []byte) (Reply, bool) {
	if !mentions(body, `"events"`) {
		return Reply{}, false
	}
	var check struct {
		Events *[]json.RawMessage `json:"events"`
	}
	if json.Unmarshal(body, &check) != nil || check.Events == nil || len(*check.Events) > 0 {
		return Reply{}, false
	}
	return jsonReply(map[string]any{})
}
