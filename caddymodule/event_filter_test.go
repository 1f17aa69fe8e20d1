package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/jsonpath"
)

// stripeBody is a Stripe-shaped event of type typ for customer.
func stripeBody(id, typ, customer string) string {
	return `{"id":"` + id + `","type":"` + typ + `","data":{"object":{"customer":"` + customer + `","amount_due":1500,"paid":true,"ratio":1.50,"discount":null,"lines":["a"]}}}`
}

func TestOnlyValuesMatchExactlyOrByPrefix(t *testing.T) {
	body := []byte(stripeBody("evt_1", "invoice.paid", "cus_42"))
	for _, tc := range []struct {
		name   string
		filter Filter
		want   bool
	}{
		{"exact type", Filter{From: "json", Name: "type", Values: []string{"invoice.paid"}}, true},
		{"one of several", Filter{From: "json", Name: "type", Values: []string{"customer.created", "invoice.paid"}}, true},
		{"other type", Filter{From: "json", Name: "type", Values: []string{"invoice.created"}}, false},
		{"prefix", Filter{From: "json", Name: "type", Values: []string{"customer.*", "invoice.*"}}, true},
		{"prefix of another family", Filter{From: "json", Name: "type", Values: []string{"customer.*"}}, false},
		{"exact is not a prefix", Filter{From: "json", Name: "type", Values: []string{"invoice"}}, false},
		{"case matters", Filter{From: "json", Name: "type", Values: []string{"Invoice.paid"}}, false},
		{"nested path", Filter{From: "json", Name: "data.object.customer", Values: []string{"cus_42"}}, true},
		{"integer as sent", Filter{From: "json", Name: "data.object.amount_due", Values: []string{"1500"}}, true},
		{"decimal in shortest form", Filter{From: "json", Name: "data.object.ratio", Values: []string{"1.5"}}, true},
		{"decimal as sent", Filter{From: "json", Name: "data.object.ratio", Values: []string{"1.50"}}, false},
		{"boolean", Filter{From: "json", Name: "data.object.paid", Values: []string{"true"}}, true},
		{"star: any value there", Filter{From: "json", Name: "data.object.customer", Values: []string{"*"}}, true},
		{"star: missing field", Filter{From: "json", Name: "data.object.subscription", Values: []string{"*"}}, false},
		{"star: null", Filter{From: "json", Name: "data.object.discount", Values: []string{"*"}}, false},
		{"star: an object", Filter{From: "json", Name: "data.object", Values: []string{"*"}}, false},
		{"star: an array", Filter{From: "json", Name: "data.object.lines", Values: []string{"*"}}, false},
		{"an array's element by path", Filter{From: "json", Name: "data.object.lines.0", Values: []string{"a"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.filter
			if err := f.provision(); err != nil {
				t.Fatal(err)
			}
			if got, err := f.matches(&http.Request{Header: http.Header{}}, new(jsonpath.NewBody(body))); got != tc.want || err != nil {
				t.Fatalf("only %s %s %v on %s: matched %v, want %v", f.From, f.Name, f.Values, body, got, tc.want)
			}
		})
	}
}

func TestOnlyJSONNeverMatchesABodyThatIsNotJSON(t *testing.T) {
	h := &Handler{Only: []Filter{{From: "json", Name: "type", Values: []string{"*"}}}}
	if err := h.provisionFilters(); err != nil {
		t.Fatal(err)
	}
	// gjson alone would find a "type" in this truncated body.
	body := []byte(`{"type":"invoice.paid","data":{`)
	w := &discardWriter{header: http.Header{}}
	answered, err := h.filter(&outcome{w: w}, &http.Request{Header: http.Header{}}, new(jsonpath.NewBody(body)))
	if err != nil || !answered || w.status != http.StatusOK {
		t.Fatalf("a truncated JSON body: answered %v (status %d, err %v), want 200 ignored", answered, w.status, err)
	}
}

// An ignored event is one DEBUG line naming the event and the `only` line it failed.
func TestOnlyIgnoredEventLoggedAtDebugWithItsFilter(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	h := &Handler{Name: "billing", logger: zap.New(core), ID: &Source{From: "json", Name: "id"}, Only: []Filter{
		{From: "json", Name: "type", Values: []string{"invoice.*"}},
		{From: "json", Name: "data.object.customer", Values: []string{"cus_vip"}},
	}}
	if err := h.provisionFilters(); err != nil {
		t.Fatal(err)
	}
	if err := h.ID.provision(); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/hooks", nil)
	out := &outcome{w: httptest.NewRecorder()}
	if answered, _ := h.filter(out, r, new(jsonpath.NewBody([]byte(stripeBody("evt_7", "invoice.paid", "cus_other"))))); !answered {
		t.Fatal("an event of another customer was not ignored")
	}
	h.logRequest(out, r)
	got := logs.TakeAll()
	if len(got) != 1 {
		t.Fatalf("%d log lines, want 1", len(got))
	}
	fields := got[0].ContextMap()
	if got[0].Level != zap.DebugLevel || got[0].Message != "webhook ignored" || fields["outcome"] != "ignored" || fields["status"] != int64(200) ||
		fields["event_id"] != "evt_7" || fields["reason"] != "no match for only json data.object.customer" {
		t.Fatalf("logged %v %q %v", got[0].Level, got[0].Message, fields)
	}
}

func TestOnlyHeaderMatchesAnyOfItsLines(t *testing.T) {
	f := Filter{From: "header", Name: "x-shop-topic", Values: []string{"orders/*"}}
	if err := f.provision(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lines []string
		want  bool
	}{
		{[]string{"orders/create"}, true},
		{[]string{"products/update", "orders/paid"}, true},
		{[]string{"products/update, orders/paid"}, false}, // a line compares whole
		{[]string{"Orders/create"}, false},
		{nil, false},
	} {
		r := &http.Request{Header: http.Header{}}
		for _, v := range tc.lines {
			r.Header.Add("X-Shop-Topic", v)
		}
		if got, _ := f.matches(r, nil); got != tc.want {
			t.Errorf("X-Shop-Topic lines %q: matched %v, want %v", tc.lines, got, tc.want)
		}
	}
}

// Matching a header allocates nothing: the filters were compiled at provision.
func TestOnlyHeaderMatchingAllocatesNothing(t *testing.T) {
	f := Filter{From: "header", Name: "User-Agent", Values: []string{"curl/*", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"}}
	if err := f.provision(); err != nil {
		t.Fatal(err)
	}
	r := &http.Request{Header: http.Header{"User-Agent": {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"}}}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = f.matches(r, nil) }); allocs != 0 {
		t.Fatalf("matching a header allocated %v times", allocs)
	}
}

func TestUnmarshalCaddyfileOnlyLines(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hookgate {
		preset stripe
		only   json type invoice.paid customer.*
		only   header User-Agent Stripe/*
	}`)
	var got Handler
	if err := got.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := []Filter{
		{From: "json", Name: "type", Values: []string{"invoice.paid", "customer.*"}},
		{From: "header", Name: "User-Agent", Values: []string{"Stripe/*"}},
	}
	if !reflect.DeepEqual(got.Only, want) {
		t.Fatalf("got  %+v\nwant %+v", got.Only, want)
	}
}

func TestOnlyRefusedAtLoad(t *testing.T) {
	for input, wantErr := range map[string]string{
		"only json type":                 "only takes: json|header <path|name> <value>...",
		"only":                           "only takes: json|header <path|name> <value>...",
		"only body type invoice.paid":    "only body: the source must be json or header",
		`only json "" invoice.paid`:      "only json: the JSON path is empty",
		`only header "" x`:               "only header: the header name is empty",
		"only json type *.paid":          "value \"*.paid\": `*` may only end a value",
		"only json type invoice.*.paid":  "value \"invoice.*.paid\": `*` may only end a value",
		`only json type invoice.paid ""`: "only json type: a value is empty",
		// Headers no request reaches hookgate with: every event would be answered 200 ignored.
		"only header Host hooks.example.com":   "only header Host: Go hands the request's host apart from its headers",
		"only header Hookgate-Verified stripe": "only header Hookgate-Verified: hookgate removes every incoming Hookgate-* header",
		`only header "X Event" invoice`:        `only header "X Event": not a valid header name`,
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hookgate {\n " + input + "\n}"))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got error %v, want one containing %q", input, err, wantErr)
		}
	}

	// The JSON config is refused when it loads, as the Caddyfile is when it is adapted.
	for name, tc := range map[string]struct {
		only    Filter
		wantErr string
	}{
		"no values":      {Filter{From: "json", Name: "type"}, "only json type: at least one value is required"},
		"unknown source": {Filter{From: "query", Name: "type", Values: []string{"x"}}, "only query: the source must be json or header"},
		"inner star":     {Filter{From: "json", Name: "type", Values: []string{"a*b"}}, "may only end a value"},
		"empty path":     {Filter{From: "json", Values: []string{"x"}}, "the JSON path is empty"},
		"own header":     {Filter{From: "header", Name: "hookgate_event_id", Values: []string{"*"}}, "removes every incoming Hookgate-* header"},
		"not a header":   {Filter{From: "header", Name: "X-Event:", Values: []string{"*"}}, "not a valid header name"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
			defer cancel()
			h := Handler{Preset: "stripe", Secrets: []string{hooktest.Secret}, Only: []Filter{tc.only}}
			err := h.Provision(ctx)
			if err == nil {
				h.Cleanup()
				t.Fatalf("provisioned, want error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), hooktest.Secret) {
				t.Fatalf("error %q, want one containing %q and no secret", err, tc.wantErr)
			}
		})
	}
}

// BenchmarkRequestPathFiltered is BenchmarkRequestPath's sync route behind `only json type`: an
// event the filter hands on, and one it ignores.
func BenchmarkRequestPathFiltered(b *testing.B) {
	for name, value := range map[string]string{"matched": "bench.*", "ignored": "invoice.paid"} {
		b.Run(name, func(b *testing.B) {
			f := newRequestPathFixture(b, false, nil)
			f.h.Only = []Filter{{From: "json", Name: "type", Values: []string{value}}}
			if err := f.h.provisionFilters(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(f.body)))
			for b.Loop() {
				f.serve(b, 0)
			}
		})
	}
}
