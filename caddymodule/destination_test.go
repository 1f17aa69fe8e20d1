package caddymodule

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

func TestUnmarshalCaddyfileNamedForwards(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hookgate {
		preset standard
		forward http://legacy:3000
		forward billing http://billing:8080 {
			only json type invoice.*
			rate 5/s
		}
		forward oncall http://oncall:9000 {
			only json type charge.dispute.*
			only header X-Env prod
		}
	}`)
	var got Handler
	if err := got.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if got.Forward == nil || got.Forward.URL != "http://legacy:3000" || got.Forward.Name != "" {
		t.Fatalf("the lone forward: %+v", got.Forward)
	}
	if len(got.Forwards) != 2 || got.Forwards[0].Name != "billing" || got.Forwards[0].Rate != "5/s" ||
		len(got.Forwards[0].Only) != 1 || got.Forwards[1].Name != "oncall" || len(got.Forwards[1].Only) != 2 ||
		got.Forwards[1].Only[1].From != "header" {
		t.Fatalf("named forwards: %+v %+v", got.Forwards[0], got.Forwards[len(got.Forwards)-1])
	}

	for input, wantErr := range map[string]string{
		"hookgate {\n forward http://a\n forward http://b\n}":       "name each of several",
		"hookgate {\n forward a/b http://x\n}":                      `destination name "a/b"`,
		"hookgate {\n forward billing http://x extra\n}":            "forward takes: [name] <url>",
		"hookgate {\n forward billing http://x {\n only json\n}\n}": "only takes",
		"hookgate {\n forward billing ftp://x\n}":                   "ftp",
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got error %v, want one containing %q", input, err, wantErr)
		}
	}
}

// Two destinations of one name, or a lone forward beside one named default, are refused when
// the config loads, naming the route.
func TestDestinationNamesAreUniqueInARoute(t *testing.T) {
	site := func(forwards string) string {
		return "{\n\tadmin off\n}\nhttp://localhost:9080 {\n\thookgate /hooks/* {\n\t\tpreset github\n\t\tsecret x\n\t\tname orders\n" +
			forwards + "\t}\n\trespond 200\n}\n"
	}
	for forwards, want := range map[string]string{
		"\t\tforward a http://127.0.0.1:1\n\t\tforward a http://127.0.0.1:2\n":     `hookgate route "orders": forward: two destinations are named a`,
		"\t\tforward http://127.0.0.1:1\n\t\tforward default http://127.0.0.1:2\n": "two destinations are named default",
	} {
		if err := validateCaddyfile(t, site(forwards)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", forwards, err, want)
		}
	}
}

// typedEvent is event id of type typ about entity at version, signed now as the standard
// preset signs.
func typedEvent(t *testing.T, id, typ, entity string, version int) *hooktest.Event {
	body := fmt.Sprintf(`{"type":%q,"data":{"object":{"id":%q,"updated":%d}}}`, typ, entity, version)
	return hooktest.SignedEvent(t, id, body, time.Now(), hooktest.Secret)
}

// startFanOutGateway runs route "fanout" with the given destinations' lines.
func startFanOutGateway(t *testing.T, forwards ...string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("fanout", unusedUpstream, forwards...), "caddyfile")
	return tester
}

// fastForward is a destination's lines: name, address, quick retries, and extra lines.
func fastForward(name, addr string, extra ...string) string {
	return fmt.Sprintf("forward %s http://%s {\n\t\t\tbackoff 50ms\n\t\t\tjitter none\n\t\t\ttimeout 2s\n\t\t\t%s\n\t\t}",
		name, addr, strings.Join(extra, "\n\t\t\t"))
}

// Each destination gets the accepted events its `only` lines take and no other; an event none
// takes is answered 200 ignored and stored nowhere; a provider's retry is a duplicate for all.
func TestEachDestinationGetsWhatItsFiltersTake(t *testing.T) {
	legacy, billing, oncall := hooktest.NewUpstream(t), hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	tester := startFanOutGateway(t,
		fastForward("default", legacy.Listener.Addr().String(), "only json type invoice.* charge.*"),
		fastForward("billing", billing.Listener.Addr().String(), "only json type invoice.*"),
		fastForward("oncall", oncall.Listener.Addr().String(), "only json type charge.dispute.*"),
	)
	invoice := typedEvent(t, "evt_fan_invoice", "invoice.paid", "in_1", 1)
	dispute := typedEvent(t, "evt_fan_dispute", "charge.dispute.created", "dp_1", 1)
	charge := typedEvent(t, "evt_fan_charge", "charge.succeeded", "ch_1", 1)
	customer := typedEvent(t, "evt_fan_customer", "customer.created", "cus_1", 1)
	for _, ev := range []*hooktest.Event{invoice, dispute, charge} {
		hooktest.ExpectReply(t, ev.ID, send(t, tester.Client, ev), http.StatusAccepted, `"id":"`+ev.ID+`"`)
	}
	got := send(t, tester.Client, customer)
	if got.Status != http.StatusOK || got.Body != ignoredReply {
		t.Fatalf("an event no destination takes: %d %q, want 200 %q", got.Status, got.Body, ignoredReply)
	}
	hooktest.WaitFor(t, "deliveries", 10*time.Second, func() bool {
		return legacy.Total() == 3 && billing.Total() == 1 && oncall.Total() == 1
	})
	for _, c := range []struct {
		up   *hooktest.Upstream
		want []*hooktest.Event
	}{{legacy, []*hooktest.Event{invoice, dispute, charge}}, {billing, []*hooktest.Event{invoice}}, {oncall, []*hooktest.Event{dispute}}} {
		for _, ev := range c.want {
			if c.up.Count(ev.ID) != 1 {
				t.Errorf("%s reached an upstream %d times, want once", ev.ID, c.up.Count(ev.ID))
			}
		}
	}
	hooktest.ExpectReply(t, "the provider's retry", send(t, tester.Client, invoice), http.StatusOK, `"duplicate":true`)
	for _, dest := range []string{"default", "billing", "oncall"} {
		if status, body := admin(t, http.MethodGet, "/hookgate/events/fanout?dest="+dest+"&id=evt_fan_customer"); status != http.StatusNotFound {
			t.Errorf("the ignored event in %s: %d %s, want 404", dest, status, body)
		}
	}
	status, body := admin(t, http.MethodGet, "/hookgate/events/fanout?dest=billing&id=evt_fan_invoice")
	if status != http.StatusOK || !strings.Contains(body, `"state":"delivered"`) {
		t.Errorf("the invoice in billing: %d %s", status, body)
	}
	if status, body := admin(t, http.MethodGet, "/hookgate/events/fanout?id=evt_fan_invoice"); status != http.StatusBadRequest || !strings.Contains(body, "billing, default, oncall") {
		t.Errorf("without dest on a route of three destinations: %d %s, want 400 naming them", status, body)
	}
}

// A destination whose upstream refuses every connection keeps its events queued for itself;
// the others get every event.
func TestADestinationThatIsDownHoldsUpNoOther(t *testing.T) {
	a, c := hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close() // refuses every connection
	tester := startFanOutGateway(t,
		fastForward("a", a.Listener.Addr().String()),
		fastForward("down", downAddr),
		fastForward("c", c.Listener.Addr().String()),
	)
	const n = 40
	for i := range n {
		ev := typedEvent(t, fmt.Sprintf("evt_down_%02d", i), "invoice.paid", fmt.Sprintf("down_in_%d", i), 1)
		hooktest.ExpectReply(t, ev.ID, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "a and c get every event", 20*time.Second, func() bool { return a.Distinct() == n && c.Distinct() == n })
	status, body := admin(t, http.MethodGet, "/hookgate/status/fanout?dest=down")
	if status != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"backlog":%d`, n)) {
		t.Errorf("the down destination's status: %d %s, want its backlog of %d", status, body, n)
	}
	for _, dest := range []string{"a", "c"} { // each delivery is recorded just after it arrives
		hooktest.WaitFor(t, dest+"'s backlog empty", 10*time.Second, func() bool {
			status, body := admin(t, http.MethodGet, "/hookgate/status/fanout?dest="+dest)
			return status == http.StatusOK && strings.Contains(body, `"backlog":0`)
		})
	}
	var all struct {
		Route        string
		Destinations map[string]struct{ Backlog int }
	}
	status, body = admin(t, http.MethodGet, "/hookgate/status/fanout")
	if err := json.Unmarshal([]byte(body), &all); status != http.StatusOK || err != nil || all.Route != "fanout" ||
		len(all.Destinations) != 3 || all.Destinations["down"].Backlog != n || all.Destinations["a"].Backlog != 0 {
		t.Errorf("the route's status without dest: %d %s, want each destination's", status, body)
	}
	out, err := runHookgateCLIAt("localhost:2999", "status", "fanout", "--dest", "down")
	if err != nil || !strings.Contains(out, fmt.Sprintf(`"backlog": %d`, n)) {
		t.Errorf("caddy hookgate status fanout --dest down: %v\n%s", err, out)
	}
	out, err = runHookgateCLIAt("localhost:2999", "events", "fanout", "--dest", "down", "--limit", "3")
	if err != nil || strings.Count(out, `"id": "evt_down_`) != 3 {
		t.Errorf("caddy hookgate events fanout --dest down --limit 3: %v\n%s", err, out)
	}
	if out, err = runHookgateCLIAt("localhost:2999", "events", "fanout"); err == nil || !strings.Contains(err.Error(), "a, c, down") {
		t.Errorf("caddy hookgate events fanout, without --dest: %v\n%s; want an error naming the destinations", err, out)
	}
	var listed struct {
		Routes []struct{ Name, Destination string }
	}
	status, body = admin(t, http.MethodGet, "/hookgate/routes")
	if err := json.Unmarshal([]byte(body), &listed); status != http.StatusOK || err != nil {
		t.Fatalf("routes: %d %s", status, body)
	}
	var names []string
	for _, r := range listed.Routes {
		if r.Name == "fanout" {
			names = append(names, r.Destination)
		}
	}
	if strings.Join(names, ",") != "a,c,down" {
		t.Errorf("routes lists fanout's destinations as %q, want a, c, down", names)
	}
}
