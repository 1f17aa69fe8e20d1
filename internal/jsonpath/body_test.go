package jsonpath

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

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

// A string on a read path that apps read in different ways (invalid UTF-8, which gjson keeps
// byte for byte and Go's encoding/json reads as U+FFFD; a lone surrogate escape, which gjson and
// Go read as U+FFFD and JavaScript's JSON.parse and Python keep as that code unit) is refused
// like a key spelt twice: otherwise two events the app tells apart share one event ID or entity
// in the ledger (the second is answered 200 duplicate or stale and never handed on), or the filter
// and the ledger read another value than the app.
func TestJSONStringsAppsReadDifferentlyAreRefused(t *testing.T) {
	path, err := Compile("id")
	if err != nil {
		t.Fatal(err)
	}
	read := func(body string) (string, error) {
		res, err := (&Body{raw: []byte(body)}).Get(&path)
		return res.String(), err
	}
	// JSON.parse reads these two IDs as different strings ("evt_\ud800", "evt_\udbff").
	a, errA := read(`{"id":"evt_\ud800"}`)
	b, errB := read(`{"id":"evt_\udbff"}`)
	var refused *Refusal
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
	path, err := Compile("type")
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
	res, err := (&Body{raw: []byte(body)}).Get(&path)
	var refused *Refusal
	if !errors.As(err, &refused) {
		t.Fatalf("body %s, path type: read as %v (exists %v), err %v; a Go app reads type %q: want a *Refusal", body, res.Raw, res.Exists(), err, app.Type)
	}
}

// Reading one field of a 10 MiB body (max_body 10MiB) allocates about what that field holds, as
// gjson.Get did: not a copy of every string it walks past. Each JSON path a route reads (only,
// id, version's two, timestamp_json) otherwise costs the size of the body again, outside the body
// budget, per request.
func TestReadingAJSONFieldDoesNotCopyTheValuesItSkips(t *testing.T) {
	body := []byte(`{"pad":"` + strings.Repeat(`\u0041`, 10<<20/6) + `","type":"invoice.paid"}`)
	path, err := Compile("type")
	if err != nil {
		t.Fatal(err)
	}
	doc := &Body{raw: body}
	if err := doc.check(); err != nil { // validation apart: it allocates nothing
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := doc.Get(&path)
	runtime.ReadMemStats(&after)
	if err != nil || res.String() != "invoice.paid" {
		t.Fatalf("get: %q, %v", res.String(), err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Errorf("reading `type` from a %d MiB body allocated %d MiB, want at most 1 MiB", len(body)>>20, allocated>>20)
	}
}

// A JSON path names one value by its keys and array indexes; gjson's wildcards, queries and
// modifiers, which pick among several, are refused, and `\` makes a dot part of a key.
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
		if _, err := Compile(text); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("Compile(%q): %v, want an error containing %q", text, err, wantErr)
		}
	}
	path, err := Compile(`meta\.data.list.1.\*`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&Body{raw: []byte(`{"meta":{"data":0},"meta.data":{"list":[{},{"*":"star"}]}}`)}).Get(&path)
	if err != nil || got.String() != "star" {
		t.Fatalf(`meta\.data.list.1.\*: %q, %v; want "star"`, got.String(), err)
	}

}

// BenchmarkJSONRead is what reading one path of a 1 KiB Stripe-shaped body costs: hookgate's
// reader (the flat depth count, gjson's validation, and the walk that checks each key on the
// path is there once), beside gjson alone (validation and GetBytes, which take the first key).
func BenchmarkJSONRead(b *testing.B) {
	body := []byte(`{"id":"evt_1","object":"event","api_version":"2024-06-20","created":1700000000,"type":"invoice.paid",` +
		`"data":{"object":{"id":"in_1","object":"invoice","amount_due":1500,"customer":"cus_1","lines":{"data":[{"id":"il_1","amount":1500}]},` +
		`"metadata":{"pad":"` + strings.Repeat("x", 600) + `"},"status":"paid"}},"livemode":false,"pending_webhooks":1}`)
	path, err := Compile("data.object.id")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hookgate", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			doc := Body{raw: body}
			if v, err := doc.Get(&path); err != nil || v.Str != "in_1" {
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
