package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
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

// Every JSON path of a route is checked when the config loads: gjson's query syntax, which picks
// among several values, is refused, naming the subdirective and the path.
func TestJSONPathsAreCheckedWhenTheConfigLoads(t *testing.T) {
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
