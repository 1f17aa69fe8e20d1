package verify

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// referenceParams is how {params} was computed before the allocation-free walker: the form
// through url.ParseQuery, each name's distinct values sorted, names sorted.
func referenceParams(body string) (string, error) {
	form, err := url.ParseQuery(body)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(form)) {
		values := slices.Clone(form[name])
		slices.Sort(values)
		for _, value := range slices.Compact(values) {
			b.WriteString(name)
			b.WriteString(value)
		}
	}
	return b.String(), nil
}

// walkedParams is what the walker signs for body.
func walkedParams(body []byte) (string, error) {
	form, err := parseForm(body)
	if err != nil {
		return "", err
	}
	defer form.release()
	var b bytes.Buffer
	form.writeTo(&b)
	return b.String(), nil
}

// checkSameParams fails when the walker and url.ParseQuery disagree on body: other signed
// bytes, or another verdict or error message.
func checkSameParams(t *testing.T, body string) {
	t.Helper()
	want, wantErr := referenceParams(body)
	got, err := walkedParams([]byte(body))
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("form %q: walker error %v, url.ParseQuery error %v", body, err, wantErr)
	}
	if got != want {
		t.Fatalf("form %q: walker signs %q, url.ParseQuery and sort sign %q", body, got, want)
	}
}

// formPieces are the parts random forms are made of: repeated and empty names and values,
// "+", escapes good and bad, pairs without "=", empty pairs, semicolons, non-ASCII.
var formPieces = []string{"a", "b", "Body", "From", "=", "==", "&", "&&", "+", "%2B", "%20", "%41",
	"%e9", "%C3%A9", "%", "%4", "%zz", "%%", ";", "é", "0", "", "a=1", "a=2", "a=1", "=x", "x="}

func randomForm(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(formPieces[r.IntN(len(formPieces))])
	}
	return b.String()
}

// The walker signs, for every form, the bytes url.ParseQuery and a sort signed, and refuses
// the forms it refused with the same words.
func TestFormParamsMatchParseQuery(t *testing.T) {
	for _, body := range []string{
		"", "&", "=", "a", "a=", "=a", "a=1&a=1&a=2&a=0", "b=1&a=2&a=1&b=", "a+b=c+d&a%20b=c%20d",
		"CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212",
		"Body=hello&From=%2B15551234567&To=%2B15557654321", "a=%zz&b=%", "a=1;b=2", "a=%zz;", "%=1",
		"a=%4", "a=%41%4", "k=v=w", strings.Repeat("a&", maxQueryParams-1), strings.Repeat("a&", maxQueryParams),
	} {
		checkSameParams(t, body)
	}
	r := rand.New(rand.NewPCG(11, 6))
	parsed := 0
	for range 20000 {
		body := randomForm(r)
		checkSameParams(t, body)
		if _, err := url.ParseQuery(body); err == nil {
			parsed++
		}
	}
	if parsed < 5000 {
		t.Fatalf("only %d of the 20000 random forms parse: too few signed bytes compared", parsed)
	}
}

// FuzzFormParamsMatchParseQuery is TestFormParamsMatchParseQuery for any form.
func FuzzFormParamsMatchParseQuery(f *testing.F) {
	for _, vector := range providerVectors {
		if vector.preset == "twilio" {
			f.Add(vector.body)
		}
	}
	f.Add("To=%2B1&Body=caf%C3%A9+au+lait&Body=&Flag&Body=a;b&c=%zz")
	f.Fuzz(checkSameParams)
}

// queryValue finds the parameter url.ParseQuery(query).Get finds, when Has says it is there.
func TestQueryValueMatchesParseQuery(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 7))
	queries := []string{"a=1&bodySHA256=AB&bodySHA256=cd", "bodySHA256=%zz&bodySHA256=ok", "x=1;y=2&bodySHA256=v",
		"body%53HA256=v", "bodySHA256", "bodySHA256=&bodySHA256=v", strings.Repeat("&", maxQueryParams) + "bodySHA256=v"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString([]string{"bodySHA256", "bodySHA256=", "body%53HA256=", "=", "&", ";", "%zz", "0a", "F", "#"}[r.IntN(10)])
		}
		queries = append(queries, b.String())
	}
	for _, query := range queries {
		checkQueryValueMatchesParseQuery(t, query)
	}
}

// checkQueryValueMatchesParseQuery fails t unless queryValue reads bodySHA256 from query as
// url.ParseQuery does.
func checkQueryValueMatchesParseQuery(t *testing.T, query string) {
	t.Helper()
	values, _ := url.ParseQuery(query)
	want, wantFound := values.Get("bodySHA256"), values.Has("bodySHA256")
	got, found := queryValue(nil, "https://example.com/hook?"+query, "bodySHA256")
	if found != wantFound || string(got) != want {
		t.Fatalf("query %q: queryValue gives %q (found %v), url.ParseQuery %q (found %v)", query, got, found, want, wantFound)
	}
}

// isForm reads a Content-Type as mime.ParseMediaType does.
func TestIsFormMatchesParseMediaType(t *testing.T) {
	for _, contentType := range []string{"", formType, "Application/X-WWW-Form-URLEncoded", " " + formType + " ",
		formType + "; charset=utf-8", formType + ";", formType + ";;", formType + "; charset", formType + "; a=1; a=2",
		formType + "; a=1; a=1", formType + "x", "application/json", "multipart/form-data; boundary=x", "\u00a0" + formType,
		"application/x-www-form-urlencoded/x", "text/plain; " + formType} {
		media, _, _ := mime.ParseMediaType(contentType)
		if got, want := isForm(http.Header{"Content-Type": {contentType}}), media == formType; got != want {
			t.Errorf("Content-Type %q: isForm %v, mime.ParseMediaType says %v", contentType, got, want)
		}
	}
}
