package verify

import (
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
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// oracleCase is one provider's smoke case: providers whose library signs are signed by the
// oracle; the others are signed here with the scheme the provider documents.
type oracleCase struct {
	provider    string
	secret      string
	body        string
	url         string
	contentType string
	extra       http.Header                                               // headers the library wants beside the signature
	goSign      func(secret, body, url string, now time.Time) http.Header // nil: the library signs
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func oracleHeader(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// standardSigned signs the Standard Webhooks way ({id}.{ts}.{body}, whsec_ key base64-decoded)
// under the given header prefix ("svix-" or "webhook-").
func standardSigned(prefix string) func(secret, body, url string, now time.Time) http.Header {
	return func(secret, body, url string, now time.Time) http.Header {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			panic(err)
		}
		id, ts := "msg_oracle_1", strconv.FormatInt(now.Unix(), 10)
		sig := base64.StdEncoding.EncodeToString(hmacSHA256(key, id+"."+ts+"."+body))
		return oracleHeader(prefix+"id", id, prefix+"timestamp", ts, prefix+"signature", "v1,"+sig)
	}
}

func oracleCases(t *testing.T) []oracleCase {
	t.Helper()
	const body = `{"id":"evt_1","type":"test","note":"hello"}`
	const url = "https://hooks.example.test/in/provider?x=1"
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}

	hexBody := func(header string) func(secret, body, url string, now time.Time) http.Header {
		return func(secret, body, _ string, _ time.Time) http.Header {
			return oracleHeader(header, hex.EncodeToString(hmacSHA256([]byte(secret), body)))
		}
	}
	return []oracleCase{
		{provider: "stripe", secret: "whsec_stripe_oracle", body: body},
		{provider: "github", secret: "gh secret", body: body},
		{provider: "shopify", secret: "shpss_oracle", body: body, url: url, extra: oracleHeader(
			"X-Shopify-Topic", "orders/create", "X-Shopify-Shop-Domain", "oracle.myshopify.com",
			"X-Shopify-API-Version", "2025-10", "X-Shopify-Webhook-Id", "wh_1")},
		{provider: "twilio", secret: "twilio_token", body: "Body=hello&From=%2B15551234567&To=%2B15557654321",
			url: url, contentType: "application/x-www-form-urlencoded"},
		{provider: "twilio", secret: "twilio_token", body: body, url: url, contentType: "application/json"},
		{provider: "hubspot", secret: "hubspot_secret", body: body, url: url},
		{provider: "standard", secret: whsec, body: body},
		{provider: "svix", secret: whsec, body: body},
		{provider: "workos", secret: "wk_secret", body: body},
		{provider: "sanity", secret: "sanity_secret", body: body},

		{provider: "slack", secret: "slack_secret", body: body, goSign: func(secret, body, _ string, now time.Time) http.Header {
			ts := strconv.FormatInt(now.Unix(), 10)
			return oracleHeader("X-Slack-Request-Timestamp", ts,
				"X-Slack-Signature", "v0="+hex.EncodeToString(hmacSHA256([]byte(secret), "v0:"+ts+":"+body)))
		}},
		{provider: "paddle", secret: "pdl_ntfset_oracle", body: body, goSign: func(secret, body, _ string, now time.Time) http.Header {
			ts := strconv.FormatInt(now.Unix(), 10)
			return oracleHeader("Paddle-Signature", "ts="+ts+";h1="+hex.EncodeToString(hmacSHA256([]byte(secret), ts+":"+body)))
		}},
		// Linear's library trusts only webhookTimestamp (ms) inside the body; the body is built per run.
		{provider: "linear", secret: "lin_wh_secret", body: "", goSign: hexBody("Linear-Signature")},
		{provider: "discord", secret: hex.EncodeToString(edPub), body: body, goSign: func(_, body, _ string, now time.Time) http.Header {
			ts := strconv.FormatInt(now.Unix(), 10)
			return oracleHeader("X-Signature-Timestamp", ts,
				"X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(edPriv, []byte(ts+body))))
		}},
		{provider: "sendgrid", secret: base64.StdEncoding.EncodeToString(spki), body: body, goSign: func(_, body, _ string, now time.Time) http.Header {
			ts := strconv.FormatInt(now.Unix(), 10)
			digest := sha256.Sum256([]byte(ts + body))
			sig, err := ecdsa.SignASN1(rand.Reader, ecKey, digest[:])
			if err != nil {
				panic(err)
			}
			return oracleHeader("X-Twilio-Email-Event-Webhook-Timestamp", ts,
				"X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
		}},
		{provider: "square", secret: "square_key", body: body, url: url, goSign: func(secret, body, url string, _ time.Time) http.Header {
			return oracleHeader("X-Square-Hmacsha256-Signature", base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), url+body)))
		}},
		{provider: "mux", secret: "mux_secret", body: body, goSign: func(secret, body, _ string, now time.Time) http.Header {
			ts := strconv.FormatInt(now.Unix(), 10)
			return oracleHeader("Mux-Signature", "t="+ts+",v1="+hex.EncodeToString(hmacSHA256([]byte(secret), ts+"."+body)))
		}},
		{provider: "razorpay", secret: "rzp_secret", body: body, goSign: hexBody("X-Razorpay-Signature")},
		{provider: "resend", secret: whsec, body: body, goSign: standardSigned("svix-")},
		{provider: "clerk", secret: whsec, body: body, url: url, goSign: standardSigned("svix-")},
		{provider: "openai", secret: whsec, body: body, goSign: standardSigned("webhook-")},
		{provider: "line", secret: "line_secret", body: body, goSign: func(secret, body, _ string, _ time.Time) http.Header {
			return oracleHeader("X-Line-Signature", base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), body)))
		}},
		{provider: "gocardless", secret: "gc_secret", body: body, goSign: hexBody("Webhook-Signature")},
		{provider: "elevenlabs", secret: "el_secret", body: body, goSign: func(secret, body, _ string, now time.Time) http.Header {
			ts := strconv.FormatInt(now.Unix(), 10)
			return oracleHeader("ElevenLabs-Signature", "t="+ts+",v0="+hex.EncodeToString(hmacSHA256([]byte(secret), ts+"."+body)))
		}},
		{provider: "box", secret: "box_key", body: body, goSign: func(secret, body, _ string, now time.Time) http.Header {
			ts := now.UTC().Format(time.RFC3339)
			return oracleHeader("Box-Delivery-Timestamp", ts, "Box-Signature-Version", "1", "Box-Signature-Algorithm", "HmacSHA256",
				"Box-Signature-Primary", base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), body+ts)))
		}},
	}
}

// TestOracleAnswers proves the oracle before presets lean on it: for every provider, the
// provider's own library accepts a correctly signed request (signed by the library itself where
// it can sign, else by the documented scheme computed here) and rejects the same request with one
// byte of the body changed. A bad request gets a refusal, and the oracle keeps answering.
func TestOracleAnswers(t *testing.T) {
	useOracle(t)
	if _, err := oracleReady(); err != nil {
		t.Fatal(err)
	}
	requests, started := 0, time.Now()
	for _, c := range oracleCases(t) {
		name := c.provider
		if c.contentType != "" {
			name += "/" + c.contentType
		}
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			body := c.body
			if c.provider == "linear" {
				body = fmt.Sprintf(`{"action":"create","type":"Issue","note":"hello","webhookTimestamp":%d}`, now.UnixMilli())
			}
			req := oracleRequest{Provider: c.provider, Secret: c.secret, Body: body, ID: "msg_oracle_1",
				TimeMs: now.UnixMilli(), URL: c.url, Method: http.MethodPost, ContentType: c.contentType}

			var headers http.Header
			if c.goSign == nil {
				headers, req.URL = oracleSign(t, req)
			} else {
				headers = c.goSign(c.secret, body, c.url, now)
				signReq := req
				signReq.Op = "sign"
				if resp := askOracle(t, signReq); resp.OK || resp.Error != "verify-only" {
					t.Errorf("sign %s: got %+v, want the verify-only refusal", c.provider, resp)
				}
			}
			for name, values := range c.extra {
				headers[name] = values
			}
			if c.contentType != "" {
				headers.Set("Content-Type", c.contentType)
			}
			req.Headers = headers
			if err := oracleVerify(t, req); err != nil {
				t.Errorf("%s's library rejected a correctly signed request: %v\nheaders: %v", c.provider, err, headers)
			}
			tampered := req
			tampered.Body = strings.Replace(body, "hello", "hellp", 1)
			if err := oracleVerify(t, tampered); err == nil {
				t.Errorf("%s's library accepted a body with one byte changed", c.provider)
			}
			requests += 3
		})
	}
	t.Run("bad requests", func(t *testing.T) {
		for _, req := range []oracleRequest{
			{Op: "verify", Provider: "nosuchprovider"},
			{Op: "sign", Provider: "nosuchprovider"},
			{Op: "nosuchop", Provider: "github"},
			{Op: "verify", Provider: "twilio", URL: "not a url"},
		} {
			if resp := askOracle(t, req); resp.OK || resp.Error == "" {
				t.Errorf("%+v: got %+v, want a refusal with a reason", req, resp)
			}
		}
		// Still answering, in order, after the refusals.
		if err := oracleVerify(t, oracleRequest{Provider: "github", Secret: "s", Body: "b"}); err == nil {
			t.Error("github accepted an unsigned request")
		}
		requests += 5
	})
	elapsed := time.Since(started)
	t.Logf("oracle started and loaded every library in %v; then %d requests in %v (%v a request, other tests' among them)",
		oracleStartup.Round(time.Millisecond), requests, elapsed.Round(time.Millisecond),
		(elapsed / time.Duration(requests)).Round(time.Microsecond))
}
