package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// twilioReferenceSignature is Twilio's signature as the code before the walker computed it:
// HMAC-SHA1 over the URL and url.ParseQuery's sorted parameters.
func twilioReferenceSignature(key, rawURL, params string) string {
	mac := hmac.New(sha1.New, []byte(key))
	mac.Write([]byte(rawURL + params))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func twilioFormMessage(body, rawURL, signature string) *Message {
	return &Message{Header: http.Header{"Content-Type": {formType + "; charset=utf-8"}, "X-Twilio-Signature": {signature}},
		Body: []byte(body), Method: http.MethodPost, URL: rawURL}
}

// Through the whole verification, a form signed as the old url.ParseQuery path signed it is
// accepted, and a form signed for another form is accepted exactly when the old path signed
// the same bytes for both: no forgery the old code refused, no genuine request it accepted.
func TestTwilioWalkerAcceptsWhatParseQueryAccepted(t *testing.T) {
	c := mustPreset(t, "twilio")
	v := mustVerifier(t, c, "twilio_token")
	const rawURL = "https://example.com/hook?tenant=a"
	r := rand.New(rand.NewPCG(11, 8))
	for range 5000 {
		signedBody, sentBody := randomForm(r), randomForm(r)
		if r.IntN(4) == 0 { // the same pairs in another order or another escaping
			sentBody = strings.ReplaceAll(signedBody, "+", "%20")
		}
		signedParams, err := referenceParams(signedBody)
		if err != nil {
			continue
		}
		signature := twilioReferenceSignature("twilio_token", rawURL, signedParams)
		sentParams, sentErr := referenceParams(sentBody)
		wantAccepted := sentErr == nil && sentParams == signedParams
		result, err := v.VerifyMessage(twilioFormMessage(sentBody, rawURL, signature), time.Now())
		if (err == nil) != wantAccepted {
			t.Fatalf("form %q signed for %q: accepted %v (%v), the old path accepted %v", sentBody, signedBody, err == nil, err, wantAccepted)
		}
		if err == nil {
			want := sha256.Sum256([]byte(rawURL + sentParams))
			if got := v.SignedDigest(result, []byte(sentBody)); got != want {
				t.Fatalf("form %q: SignedDigest %x, want %x", sentBody, got, want)
			}
		}
	}
}

// Concurrent verifications of different forms, small and larger than the pool keeps, each see
// their own parameters, and a digest taken after the pool has been reused by others still
// covers the request's own form.
func TestTwilioConcurrentFormsKeepTheirOwnParams(t *testing.T) {
	c := mustPreset(t, "twilio")
	v := mustVerifier(t, c, "twilio_token")
	const rawURL = "https://example.com/hook"
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for worker := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var results []Result
			var bodies, params []string
			for i := range 30 {
				size := 1 + (worker*30+i)%7*12000 // up to 72,001 bytes: some forms outgrow the pool's 64 KiB
				body := fmt.Sprintf("W=%d&I=%d&Body=%s&Body=%s", worker, i, strings.Repeat("x", size), strings.Repeat("y", i))
				want, err := referenceParams(body)
				if err != nil {
					errs <- err
					return
				}
				signature := twilioReferenceSignature("twilio_token", rawURL, want)
				result, err := v.VerifyMessage(twilioFormMessage(body, rawURL, signature), time.Now())
				if err != nil {
					errs <- fmt.Errorf("worker %d form %d refused: %v", worker, i, err)
					return
				}
				forged := strings.Replace(body, "I=", "I=1", 1)
				if _, err := v.VerifyMessage(twilioFormMessage(forged, rawURL, signature), time.Now()); err == nil {
					errs <- fmt.Errorf("worker %d: forged form %d accepted", worker, i)
					return
				}
				results, bodies, params = append(results, result), append(bodies, body), append(params, want)
			}
			for i, result := range results { // after every other worker has reused the pool
				if got, want := v.SignedDigest(result, []byte(bodies[i])), sha256.Sum256([]byte(rawURL+params[i])); got != want {
					errs <- fmt.Errorf("worker %d form %d: digest %x, want %x", worker, i, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzIsFormMatchesParseMediaType: isForm's shortcut never disagrees with mime.ParseMediaType.
func FuzzIsFormMatchesParseMediaType(f *testing.F) {
	for _, seed := range []string{formType, formType + "; charset=utf-8", "Application/X-WWW-Form-URLEncoded ;charset=", formType + "; a=\"x;y\"", "\u0130" + formType} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, contentType string) {
		media, _, _ := mime.ParseMediaType(contentType)
		if got, want := isForm(http.Header{"Content-Type": {contentType}}), media == formType; got != want {
			t.Fatalf("Content-Type %q: isForm %v, mime.ParseMediaType says %v", contentType, got, want)
		}
	})
}

// FuzzQueryValueMatchesParseQuery: the bodySHA256 read in place is url.ParseQuery's.
func FuzzQueryValueMatchesParseQuery(f *testing.F) {
	for _, seed := range []string{"bodySHA256=AB&bodySHA256=cd", "x=1;y=2&bodySHA256=v", "body%53HA256=v&bodySHA256=%zz"} {
		f.Add(seed)
	}
	f.Fuzz(checkQueryValueMatchesParseQuery)
}

// GODEBUG's urlmaxqueryparams moves url.ParseQuery's limit on pairs, down or off: the form
// walker and the bodySHA256 reader move with it, refusing and reading what it does.
func TestFormLimitFollowsGODEBUG(t *testing.T) {
	for _, c := range []struct {
		godebug string
		pairs   int
	}{{"urlmaxqueryparams=100", 99}, {"urlmaxqueryparams=100", 100}, {"urlmaxqueryparams=0", 15000}, {"urlmaxqueryparams=20000", 19999},
		{"urlmaxqueryparams=20000", 20000}, {"", maxQueryParams}, {"", maxQueryParams + 1}} {
		t.Run(fmt.Sprintf("%s/%d", c.godebug, c.pairs), func(t *testing.T) {
			t.Setenv("GODEBUG", c.godebug)
			checkSameParams(t, strings.Repeat("a=1&", c.pairs-1)+"b=2")
			query := strings.Repeat("a=1&", c.pairs-1) + "bodySHA256=ab"
			values, _ := url.ParseQuery(query)
			if got, found := queryValue(nil, "https://example.com/hook?"+query, "bodySHA256"); found != values.Has("bodySHA256") || string(got) != values.Get("bodySHA256") {
				t.Fatalf("queryValue gives %q (found %v), url.ParseQuery %q", got, found, values.Get("bodySHA256"))
			}
		})
	}
}

// oldBodyParams is Verifier.bodyParams as it was before the walker: url.ParseQuery for the
// bodySHA256 and the form, mime.ParseMediaType for the Content-Type. ok is false for a refusal.
func oldBodyParams(m *Message) (params string, ok bool) {
	if _, query, found := strings.Cut(m.URL, "?"); found {
		if values, _ := url.ParseQuery(query); values.Has("bodySHA256") {
			sum := sha256.Sum256(m.Body)
			return "", hex.EncodeToString(sum[:]) == strings.ToLower(values.Get("bodySHA256"))
		}
	}
	if len(m.Body) == 0 {
		return "", true
	}
	if media, _, _ := mime.ParseMediaType(m.Header.Get("Content-Type")); media != formType {
		return "", false
	}
	params, err := referenceParams(string(m.Body))
	return params, err == nil
}

// FuzzTwilioVerifyMatchesOldPath: for any Content-Type, query and body, a request signed over
// the URL and some form is accepted exactly when the old path accepted it, and never panics.
func FuzzTwilioVerifyMatchesOldPath(f *testing.F) {
	f.Add(formType, "tenant=a", "To=%2B1&Body=a", "Body=a&To=%2B1")
	f.Add("application/json", "bodySHA256=44136FA355B3678A1146AD16F7E8649E94FB4FC21FE77E8310C060F61CAAFF8A", "", "")
	f.Add(formType+"; charset=utf-8", "", "a=1&a=1", "a=1")
	v := mustVerifier(f, mustPreset(f, "twilio"), "twilio_token")
	f.Fuzz(func(t *testing.T, contentType, query, body, signedForm string) {
		rawURL := "https://example.com/hook?" + query
		signedParams, err := referenceParams(signedForm)
		if err != nil {
			return
		}
		m := &Message{Header: http.Header{"Content-Type": {contentType},
			"X-Twilio-Signature": {twilioReferenceSignature("twilio_token", rawURL, signedParams)}},
			Body: []byte(body), Method: http.MethodPost, URL: rawURL}
		params, ok := oldBodyParams(m)
		wantAccepted := ok && params == signedParams
		if _, err := v.VerifyMessage(m, time.Now()); (err == nil) != wantAccepted {
			t.Fatalf("Content-Type %q, query %q, body %q signed as %q: accepted %v (%v), the old path accepted %v",
				contentType, query, body, signedForm, err == nil, err, wantAccepted)
		}
	})
}
