package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/tidwall/gjson"
)

// nested is a stripe-shaped invoice.paid event whose pad field nests depth-1 arrays, so that the
// body nests depth levels in all.
func nested(id string, depth int) string {
	return `{"id":"` + id + `","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1"}},"pad":` +
		strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// A route that reads JSON from the body refuses, with 400 and a reason, a signed body nested
// deeper than 128 levels, before anything parses it; one nested exactly 128 deep passes, and
// brackets inside strings are text.
func TestJSONNestedDeeperThanTheLimitIsRefused(t *testing.T) {
	const route = "json_depth"
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, route, up, "only json type invoice.paid", "version json data.object.id json created", "max_body 2MiB")

	hooktest.ExpectReply(t, "a body nested 128 levels deep", send(t, tester.Client, presetEvent(t, "stripe", "evt_depth_128", nested("evt_depth_128", 128))),
		http.StatusOK, "upstream says hi")
	inString := `{"id":"evt_depth_str","type":"invoice.paid","created":2,"data":{"object":{"id":"in_2"}},"pad":"\"` + strings.Repeat("[", 5000) + `"}`
	hooktest.ExpectReply(t, "a body with 5,000 brackets inside a string", send(t, tester.Client, presetEvent(t, "stripe", "evt_depth_str", inString)),
		http.StatusOK, "upstream says hi")
	for name, body := range map[string]string{
		"129 levels":                  nested("evt_depth_129", 129),
		"1 MiB of [":                  strings.Repeat("[", 1<<20),
		"deep, then not JSON at all":  strings.Repeat("{\"a\":", 200) + "oops",
		"deep inside the ID's object": `{"id":"evt_depth_id","type":"invoice.paid","data":` + strings.Repeat(`{"object":`, 130) + "1" + strings.Repeat("}", 131),
	} {
		got := send(t, tester.Client, presetEvent(t, "stripe", "evt_depth", body))
		hooktest.ExpectReply(t, name, got, http.StatusBadRequest, `"error":"the JSON body nests arrays and objects more than 128 levels deep"`)
	}
	if n := up.Total(); n != 2 {
		t.Fatalf("the app got %d requests, want the 2 within the limit", n)
	}
}

// withinDepth counts brackets outside strings only, escaped quotes included.
func TestJSONDepthCountsBracketsOutsideStrings(t *testing.T) {
	for body, want := range map[string]bool{
		`[[[]]]`:                 true,
		`[[[[]]]]`:               false,
		`["[[[[",{"a":"]]]]"}]`:  true,
		`["\"[[[["]`:             true,
		`["\\",[[[]]]]`:          false, // the string ends after an escaped backslash
		`{"k\"[[[":[[]]}`:        true,
		`"unterminated [[[[[[[[`: true,
	} {
		if got := withinDepth(body, 3); got != want {
			t.Errorf("withinDepth(%s, 3) = %v, want %v", body, got, want)
		}
	}
}

// A key on a path hookgate reads that appears twice in its object, however spelt (\u escapes,
// letter case), is refused with 400: gjson would read the first, the app most likely the last.
// A key twice off the paths hookgate reads is the app's business, and passes.
func TestDuplicateKeysOnAPathHookgateReadsAreRefused(t *testing.T) {
	const route = "json_dup"
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, route, up, "only json type invoice.paid", "version json data.object.id json created")

	for name, tc := range map[string]struct{ id, body, field string }{
		"only's key twice": {"evt_dup_1",
			`{"id":"evt_dup_1","type":"invoice.paid","type":"charge.refunded","created":1,"data":{"object":{"id":"in_1"}}}`, "type"},
		"only's key twice, once \\u-escaped": {"evt_dup_2",
			`{"id":"evt_dup_2","type":"invoice.paid","t\u0079pe":"charge.refunded","created":1,"data":{"object":{"id":"in_1"}}}`, "type"},
		"only's key twice, all escaped": {"evt_dup_3",
			`{"id":"evt_dup_3","\u0074\u0079\u0070\u0065":"invoice.paid","\u0074ype":"charge.refunded","created":1,"data":{"object":{"id":"in_1"}}}`, "type"},
		"only's key in another letter case": {"evt_dup_4",
			`{"id":"evt_dup_4","type":"invoice.paid","Type":"charge.refunded","created":1,"data":{"object":{"id":"in_1"}}}`, "type"},
		"the event ID's key twice": {"evt_dup_5",
			`{"id":"evt_dup_5","i\u0064":"evt_dup_other","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1"}}}`, "id"},
		"the version's key twice": {"evt_dup_6",
			`{"id":"evt_dup_6","type":"invoice.paid","created":1,"created":9,"data":{"object":{"id":"in_1"}}}`, "created"},
		"the entity's key twice": {"evt_dup_7",
			`{"id":"evt_dup_7","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1","ID":"in_2"}}}`, "data.object.id"},
		"a parent on the entity's path twice": {"evt_dup_8",
			`{"id":"evt_dup_8","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1"}},"d\u0061ta":{"object":{"id":"in_2"}}}`, "data.object.id"},
	} {
		got := send(t, tester.Client, presetEvent(t, "stripe", tc.id, tc.body))
		hooktest.ExpectReply(t, name, got, http.StatusBadRequest, fmt.Sprintf("JSON field %s: the key", tc.field))
		if !strings.Contains(got.Body, "appears more than once in its object") {
			t.Errorf("%s: the reason %q does not say the key appears more than once", name, got.Body)
		}
	}
	elsewhere := `{"id":"evt_dup_ok","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1","metadata":{"k":"a","k":"b","K":"c"}}},"Id2":1}`
	hooktest.ExpectReply(t, "a key twice off the paths hookgate reads", send(t, tester.Client, presetEvent(t, "stripe", "evt_dup_ok", elsewhere)),
		http.StatusOK, "upstream says hi")
	if n, m := up.Total(), up.Count("evt_dup_ok"); n != 1 || m != 1 {
		t.Fatalf("the app got %d requests (%d of evt_dup_ok), want only evt_dup_ok, once", n, m)
	}
}

// Linear's freshness is a field of the signed body: a body with that field twice, one of them
// fresh, is refused rather than judged by the first.
func TestDuplicateBodyTimestampIsRefused(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	tester.InitServer(presetGatewayConfig("linear", "json_dup_linear", up.Listener.Addr().String()), "caddyfile")
	now, old := time.Now().UnixMilli(), time.Now().Add(-time.Hour).UnixMilli()
	body := fmt.Sprintf(`{"action":"create","webhookTimestamp":%d,"webhookTimestamp":%d}`, now, old)
	got := send(t, tester.Client, presetEvent(t, "linear", "lin_dup_1", body))
	hooktest.ExpectReply(t, "webhookTimestamp twice", got, http.StatusBadRequest, "JSON field webhookTimestamp: the key")
	fresh := fmt.Sprintf(`{"action":"create","webhookTimestamp":%d}`, now)
	hooktest.ExpectReply(t, "webhookTimestamp once", send(t, tester.Client, presetEvent(t, "linear", "lin_dup_2", fresh)), http.StatusOK, "upstream says hi")
}

// A string on a read path that apps read in different ways (invalid UTF-8, which gjson keeps
// byte for byte and Go's encoding/json reads as U+FFFD; a lone surrogate escape, which gjson and
// Go read as U+FFFD and JavaScript's JSON.parse and Python keep as that code unit) is refused
// like a key spelt twice: otherwise two events the app tells apart share one event ID or entity
// in the ledger (the second is answered 200 duplicate or stale and never handed on), or the filter
// and the ledger read another value than the app.
func TestJSONStringsAppsReadDifferentlyAreRefused(t *testing.T) {
	path, err := parseJSONPath("id")
	if err != nil {
		t.Fatal(err)
	}
	read := func(body string) (string, error) {
		res, err := (&jsonBody{raw: []byte(body)}).get(&path)
		return res.String(), err
	}
	// JSON.parse reads these two IDs as different strings ("evt_\ud800", "evt_\udbff").
	a, errA := read(`{"id":"evt_\ud800"}`)
	b, errB := read(`{"id":"evt_\udbff"}`)
	var refused *jsonRefusal
	if !errors.As(errA, &refused) && !errors.As(errB, &refused) && a == b {
		t.Errorf(`IDs "evt_\ud800" and "evt_\udbff", which JavaScript tells apart, are both read as %q: the second event would be a duplicate of the first`, a)
	}
	// encoding/json reads this ID as "evt_\uFFFD"; hookgate claims another.
	body := "{\"id\":\"evt_\xff\"}"
	got, err := read(body)
	var app struct{ ID string }
	if jerr := json.Unmarshal([]byte(body), &app); jerr != nil {
		t.Fatal(jerr)
	}
	if !errors.As(err, &refused) && got != app.ID {
		t.Errorf("ID with an invalid UTF-8 byte: hookgate reads %q, encoding/json %q, and the body is not refused", got, app.ID)
	}
}

// Go's encoding/json fills a struct's `Type` field from a lone "Type" key; JavaScript reads no
// `type` at all. hookgate, which refuses to guess when a key is spelt twice, must not guess
// here either: reading it as missing makes `only json type invoice.paid` answer 200 ignored an
// event a Go app would have taken as invoice.paid.
func TestAKeyOnlyInAnotherLetterCaseIsRefusedNotMissing(t *testing.T) {
	path, err := parseJSONPath("type")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"evt_1","Type":"invoice.paid"}`
	var app struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(body), &app); err != nil || app.Type != "invoice.paid" {
		t.Fatalf("encoding/json: %q, %v", app.Type, err)
	}
	res, err := (&jsonBody{raw: []byte(body)}).get(&path)
	var refused *jsonRefusal
	if !errors.As(err, &refused) {
		t.Fatalf("body %s, path type: read as %v (exists %v), err %v; a Go app reads type %q: want a *jsonRefusal", body, res.Raw, res.Exists(), err, app.Type)
	}
}

// Reading one field of a 10 MiB body (max_body 10MiB) allocates about what that field holds, as
// gjson.Get did: not a copy of every string it walks past. Each JSON path a route reads (only,
// id, version's two, timestamp_json) otherwise costs the size of the body again, outside the body
// budget, per request.
func TestReadingAJSONFieldDoesNotCopyTheValuesItSkips(t *testing.T) {
	body := []byte(`{"pad":"` + strings.Repeat(`\u0041`, 10<<20/6) + `","type":"invoice.paid"}`)
	path, err := parseJSONPath("type")
	if err != nil {
		t.Fatal(err)
	}
	doc := &jsonBody{raw: body}
	if err := doc.check(); err != nil { // validation apart: it allocates nothing
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := doc.get(&path)
	runtime.ReadMemStats(&after)
	if err != nil || res.String() != "invoice.paid" {
		t.Fatalf("get: %q, %v", res.String(), err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Errorf("reading `type` from a %d MiB body allocated %d MiB, want at most 1 MiB", len(body)>>20, allocated>>20)
	}
}

// Two Stripe events whose IDs JavaScript's JSON.parse tells apart ("evt_\ud800" and
// "evt_\udbff", lone surrogates) and Go reads alike (U+FFFD) are not made one: each is refused 400,
// rather than the second being answered 200 duplicate, acknowledged and never handed on.
func TestEventsWhoseIDsDifferOnlyInLoneSurrogatesAreRefusedNotDuplicates(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, "json_surrogates", up)
	for _, id := range []string{`evt_\ud800`, `evt_\udbff`} {
		ev := presetEvent(t, "stripe", "evt_s", `{"id":"`+id+`","type":"invoice.paid","created":1}`)
		hooktest.ExpectReply(t, id, send(t, tester.Client, ev), http.StatusBadRequest, "a lone \\\\u surrogate, which apps decode differently")
	}
	if n := up.Total(); n != 0 {
		t.Fatalf("the app got %d requests, want none", n)
	}
}

// A JSON path names one value by its keys and array indexes; gjson's wildcards, queries and
// modifiers, which pick among several, are refused when the config loads, and `\` makes a dot
// part of a key.
func TestJSONPathsNameOneValue(t *testing.T) {
	for text, wantErr := range map[string]string{
		"items.#.type":     "`#` is gjson query syntax",
		"data.*":           "`*` is gjson query syntax",
		"typ?":             "`?` is gjson query syntax",
		"@this":            "`@` is gjson query syntax",
		"a|b":              "`|` is gjson query syntax",
		`items.#(id=="x")`: "`#` is gjson query syntax",
		"a..b":             `JSON path "a..b" has an empty key`,
		".a":               "has an empty key",
		"a.":               "has an empty key",
		"":                 "has an empty key",
		`a\`:               "ends in a lone",
	} {
		if _, err := parseJSONPath(text); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("parseJSONPath(%q): %v, want an error containing %q", text, err, wantErr)
		}
	}
	path, err := parseJSONPath(`meta\.data.list.1.\*`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&jsonBody{raw: []byte(`{"meta":{"data":0},"meta.data":{"list":[{},{"*":"star"}]}}`)}).get(&path)
	if err != nil || got.String() != "star" {
		t.Fatalf(`meta\.data.list.1.\*: %q, %v; want "star"`, got.String(), err)
	}

	// Every JSON path of a route is checked when the config loads.
	for _, tc := range []struct{ preset, line, wantErr string }{
		{"stripe", "only json data.*.type invoice.paid", `only json: JSON path "data.*.type"`},
		{"stripe", "id json events.#.id", `id: JSON path "events.#.id"`},
		{"stripe", "version json data.object.id json @now", `version: JSON path "@now"`},
		{"linear", "timestamp_json meta..ts", `timestamp_json: JSON path "meta..ts"`},
	} {
		err := validateCaddyfile(t, presetGatewayConfig(tc.preset, "json_paths", unusedUpstream, tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: loading the config: %v, want an error containing %q", tc.line, err, tc.wantErr)
		}
	}
}

// BenchmarkJSONRead is what reading one path of a 1 KiB Stripe-shaped body costs: hookgate's
// reader (the flat depth count, gjson's validation, and the walk that checks each key on the
// path is there once), beside gjson alone (validation and GetBytes, which take the first key).
func BenchmarkJSONRead(b *testing.B) {
	body := []byte(`{"id":"evt_1","object":"event","api_version":"2024-06-20","created":1700000000,"type":"invoice.paid",` +
		`"data":{"object":{"id":"in_1","object":"invoice","amount_due":1500,"customer":"cus_1","lines":{"data":[{"id":"il_1","amount":1500}]},` +
		`"metadata":{"pad":"` + strings.Repeat("x", 600) + `"},"status":"paid"}},"livemode":false,"pending_webhooks":1}`)
	path, err := parseJSONPath("data.object.id")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hookgate", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			doc := jsonBody{raw: body}
			if v, err := doc.get(&path); err != nil || v.Str != "in_1" {
				b.Fatal(v, err)
			}
		}
	})
	b.Run("gjson", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !gjson.ValidBytes(body) || gjson.GetBytes(body, "data.object.id").Str != "in_1" {
				b.Fatal("gjson")
			}
		}
	})
}
