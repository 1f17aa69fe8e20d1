package verify

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Adversarial cases for the URL-signing presets (Twilio, HubSpot): each test is a request a
// provider really sends that hookgate must accept, or one the provider never signed that it must refuse.

const formType = "application/x-www-form-urlencoded"

// Twilio drops the port of an https URL before signing ("For SMS and voice callbacks over HTTPS,
// Twilio will drop the username, password and port (if any) before computing the signature",
// twilio.com/docs/usage/security; twilio-python#392, openclaw#6334), which is why twilio-node's
// validateRequest tries the URL with and without its port. A webhook on https://host:8443/hook
// is called there but signed for https://host/hook.
func TestTwilioSignedWithoutThePortOfTheCalledURL(t *testing.T) {
	useOracle(t)
	body := "Body=hello&From=%2B15551234567&To=%2B15557654321"
	for _, called := range []string{"https://example.com:8443/hook", "https://example.com:443/hook"} {
		t.Run(called, func(t *testing.T) {
			h, _ := oracleSign(t, oracleRequest{Provider: "twilio", Secret: "twilio_token", Body: body,
				URL: "https://example.com/hook", ContentType: formType})
			h.Set("Content-Type", formType)
			if err := oracleVerify(t, oracleRequest{Provider: "twilio", Secret: "twilio_token", Body: body,
				URL: called, Method: "POST", Headers: h}); err != nil {
				t.Fatalf("precondition: twilio-node refuses the request at %s: %v", called, err)
			}
			v := mustVerifier(t, mustPreset(t, "twilio"), "twilio_token")
			m := &Message{Header: h, Body: []byte(body), Method: "POST", URL: called}
			if _, err := v.VerifyMessage(m, time.Now()); err != nil {
				t.Fatalf("twilio-node accepts Twilio's request to %s, hookgate refuses it: %v", called, err)
			}
		})
	}
}

// Twilio webhooks can be configured as HTTP GET: the parameters ride in the URL, the body is
// empty and there is no Content-Type, and the signature is the HMAC of the URL alone
// (validateRequest(url, {})).
func TestTwilioGETWebhookAccepted(t *testing.T) {
	useOracle(t)
	called := "https://example.com/hook?Body=hello&From=%2B15551234567"
	h, _ := oracleSign(t, oracleRequest{Provider: "twilio", Secret: "twilio_token", Body: "", URL: called, ContentType: formType})
	if err := oracleVerify(t, oracleRequest{Provider: "twilio", Secret: "twilio_token", Body: "",
		URL: called, Method: "GET", Headers: h}); err != nil {
		t.Fatalf("precondition: twilio-node refuses the GET request: %v", err)
	}
	v := mustVerifier(t, mustPreset(t, "twilio"), "twilio_token")
	m := &Message{Header: h, Method: "GET", URL: called}
	if _, err := v.VerifyMessage(m, time.Now()); err != nil {
		t.Fatalf("twilio-node accepts Twilio's GET webhook, hookgate refuses it: %v", err)
	}
}

// twilioJSONRequest is a JSON request as Twilio signs it: bodySHA256 appended to a URL whose
// query url.ParseQuery rejects (a ';' separator), which browsers' URL parser and Twilio's accept.
func twilioJSONRequest(t *testing.T) (signed *Message, json string) {
	t.Helper()
	json = `{"event":"call.completed","sid":"CA123"}`
	m := &Message{Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(json),
		Method: "POST", URL: "https://example.com/hook?tenant=a;b"}
	if err := SignMessage(mustPreset(t, "twilio"), "twilio_token", "", time.Time{}, m); err != nil {
		t.Fatal(err)
	}
	return m, json
}

// A genuine JSON request whose signed URL has a query url.ParseQuery refuses loses its
// bodySHA256: hookgate then wants a form, and refuses the request twilio-node accepts.
func TestTwilioJSONWithSemicolonQueryAccepted(t *testing.T) {
	useOracle(t)
	m, json := twilioJSONRequest(t)
	if err := oracleVerify(t, oracleRequest{Provider: "twilio", Secret: "twilio_token", Body: json,
		URL: m.URL, Method: "POST", Headers: m.Header}); err != nil {
		t.Fatalf("precondition: twilio-node refuses the request: %v", err)
	}
	v := mustVerifier(t, mustPreset(t, "twilio"), "twilio_token")
	if _, err := v.VerifyMessage(m, time.Now()); err != nil {
		t.Fatalf("twilio-node accepts Twilio's JSON request to %s, hookgate refuses it: %v", m.URL, err)
	}
}

// The same request replayed as an empty form: bodySHA256 is ignored, the empty form signs as
// no parameters, which is exactly what Twilio signed for the JSON body, so hookgate accepts a
// body the provider never sent.
func TestTwilioBodyHashNotBypassedAsEmptyForm(t *testing.T) {
	signed, _ := twilioJSONRequest(t)
	v := mustVerifier(t, mustPreset(t, "twilio"), "twilio_token")
	for _, forgedBody := range []string{"", "&"} {
		forged := &Message{Header: signed.Header.Clone(), Body: []byte(forgedBody), Method: "POST", URL: signed.URL}
		forged.Header.Set("Content-Type", formType)
		if _, err := v.VerifyMessage(forged, time.Now()); err == nil {
			t.Errorf("hookgate accepts body %q under the signature of a JSON body whose hash is in the signed URL %s", forgedBody, signed.URL)
		}
	}
}

// HubSpot v3 signs {method}{url}{body}{timestamp} with nothing between the fields. A timestamp
// with a leading zero reads as the same fresh time, so the '0' that ends the signed URL (of a
// request without a body, e.g. a CRM card's GET) can move into the timestamp header: a request
// for portalId=62 passes under the signature of portalId=620. No provider sends a leading zero.
func TestHubSpotLeadingZeroTimestampCannotMoveAByteOutOfTheURL(t *testing.T) {
	c := mustPreset(t, "hubspot")
	now := time.Now()
	signed := &Message{Header: http.Header{}, Method: "GET", URL: "https://example.com/card?portalId=620"}
	if err := SignMessage(c, "hubspot_secret", "", now, signed); err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, c, "hubspot_secret")
	if _, err := v.VerifyMessage(signed, now); err != nil {
		t.Fatalf("precondition: the genuine request is refused: %v", err)
	}
	forged := &Message{Header: signed.Header.Clone(), Method: "GET", URL: "https://example.com/card?portalId=62"}
	forged.Header.Set("X-HubSpot-Request-Timestamp", "0"+signed.Header.Get("X-HubSpot-Request-Timestamp"))
	if _, err := v.VerifyMessage(forged, now); err == nil {
		t.Fatalf("hookgate accepts %s with timestamp %s under the signature of %s",
			forged.URL, forged.Header.Get("X-HubSpot-Request-Timestamp"), signed.URL)
	}
}

// The same at the lowest level: a leading zero is not how any provider writes a unix time.
func TestTimestampWithLeadingZeroRefused(t *testing.T) {
	for _, unit := range []string{UnitSeconds, UnitMilliseconds} {
		raw := "0" + strconv.FormatInt(1700000000, 10)
		if _, err := parseTimestamp(raw, unit); err == nil {
			t.Errorf("parseTimestamp(%q, %s) accepts a leading zero", raw, unit)
		}
	}
}
