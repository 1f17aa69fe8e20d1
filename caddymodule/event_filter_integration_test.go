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

// ignoredReply is what the provider is answered for an event the route's `only` lines leave out.
const ignoredReply = "{\"received\":true,\"ignored\":true}\n"

// stripeEvent is a Stripe-shaped event signed as Stripe signs it, with the User-Agent Stripe sends.
func stripeEvent(t *testing.T, id, typ, customer string) *hooktest.Event {
	t.Helper()
	ev := presetEvent(t, "stripe", id, stripeBody(id, typ, customer))
	ev.Headers.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	return ev
}

// startStripeGateway runs a sync stripe route in front of up, whose answers carry
// {http.hookgate.outcome} as Hookgate-Outcome.
func startStripeGateway(t *testing.T, route string, up *hooktest.Upstream, extra ...string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(handshakeConfig("stripe", route, up.Listener.Addr().String(), extra...), "caddyfile")
	return tester
}

// expectIgnored checks that ev was answered 200 ignored, and that the app never saw it.
func expectIgnored(t *testing.T, step string, got hooktest.Reply, up *hooktest.Upstream, ev *hooktest.Event) {
	t.Helper()
	if got.Status != http.StatusOK || got.Body != ignoredReply || got.Header.Get("Hookgate-Outcome") != "ignored" {
		t.Fatalf("%s: got %d %q (outcome %q), want 200 %q (ignored)", step, got.Status, got.Body, got.Header.Get("Hookgate-Outcome"), ignoredReply)
	}
	if n := up.Count(ev.ID); n != 0 {
		t.Fatalf("%s: the app got the ignored event %d times", step, n)
	}
}

func TestOnlyHandsOnMatchingEventsAndIgnoresTheRest(t *testing.T) {
	const route = "only_sync"
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, route, up, "only json type invoice.paid customer.*")

	for _, ev := range []*hooktest.Event{
		stripeEvent(t, "evt_only_paid", "invoice.paid", "cus_1"),
		stripeEvent(t, "evt_only_customer", "customer.created", "cus_1"), // by the prefix
	} {
		got := send(t, tester.Client, ev)
		hooktest.ExpectReply(t, ev.ID, got, http.StatusOK, "upstream says hi")
		if outcome := got.Header.Get("Hookgate-Outcome"); outcome != "accepted" || up.Count(ev.ID) != 1 {
			t.Fatalf("%s: outcome %q, app saw it %d times; want accepted, once", ev.ID, outcome, up.Count(ev.ID))
		}
	}
	for _, ev := range []*hooktest.Event{
		stripeEvent(t, "evt_only_created", "invoice.created", "cus_1"),
		stripeEvent(t, "evt_only_customers", "customers.created", "cus_1"), // not customer.
		presetEvent(t, "stripe", "evt_only_untyped", `{"id":"evt_only_untyped","data":{}}`),
	} {
		expectIgnored(t, ev.ID, send(t, tester.Client, ev), up, ev)
	}
	// The provider's retry of an ignored event is ignored again, not answered as a duplicate.
	ignored := stripeEvent(t, "evt_only_created", "invoice.created", "cus_1")
	expectIgnored(t, "the retry of an ignored event", send(t, tester.Client, ignored), up, ignored)

	got := scrape(t)
	series := func(outcome string) string {
		return `hookgate_requests_total{mode="enforce",outcome="` + outcome + `",reason="",route="` + route + `"}`
	}
	if got[series("ignored")] != 4 || got[series("accepted")] != 2 {
		t.Fatalf("counted ignored %v, accepted %v; want 4 and 2", got[series("ignored")], got[series("accepted")])
	}
}

// An ignored event is not recorded in the ledger: once the route's `only` line takes it, the
// provider's retry goes through rather than being answered as a duplicate.
func TestOnlyIgnoredEventIsNotRecorded(t *testing.T) {
	const route = "only_unrecorded"
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, route, up, "only json type invoice.paid")
	ev := stripeEvent(t, "evt_only_later", "invoice.created", "cus_1")
	expectIgnored(t, "before the route takes invoice.created", send(t, tester.Client, ev), up, ev)

	tester.InitServer(handshakeConfig("stripe", route, up.Listener.Addr().String(), "only json type invoice.*"), "caddyfile")
	hooktest.ExpectReply(t, "once it does", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")
	hooktest.ExpectReply(t, "its retry", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
}

// The filter is checked after the signature: a forged event is refused 401 whether or not it
// would have matched, never told "ignored".
func TestOnlyChecksTheSignatureFirst(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, "only_forged", up, "only json type invoice.paid")
	for _, typ := range []string{"invoice.created", "invoice.paid"} {
		ev := stripeEvent(t, "evt_only_forged_"+typ, typ, "cus_1")
		sig := ev.Headers.Get("Stripe-Signature")
		last := "0"
		if strings.HasSuffix(sig, last) {
			last = "1"
		}
		ev.Headers.Set("Stripe-Signature", sig[:len(sig)-1]+last)
		got := send(t, tester.Client, ev)
		if got.Status != http.StatusUnauthorized || got.Header.Get("Hookgate-Outcome") != "rejected" {
			t.Fatalf("a forged %s: got %d %q (outcome %q), want 401 rejected", typ, got.Status, got.Body, got.Header.Get("Hookgate-Outcome"))
		}
	}
	if n := up.Total(); n != 0 {
		t.Fatalf("the app got %d forged events", n)
	}
}

// Several `only` lines must all match, a header's as well as the body's.
func TestOnlyLinesMustAllMatch(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, "only_and", up,
		"only json type invoice.*", "only json data.object.customer cus_vip cus_gold_*", "only header User-Agent Stripe/*")

	taken := stripeEvent(t, "evt_only_and_vip", "invoice.paid", "cus_vip")
	hooktest.ExpectReply(t, "every line matches", send(t, tester.Client, taken), http.StatusOK, "upstream says hi")
	gold := stripeEvent(t, "evt_only_and_gold", "invoice.created", "cus_gold_7")
	hooktest.ExpectReply(t, "every line matches, two by prefix", send(t, tester.Client, gold), http.StatusOK, "upstream says hi")

	otherCustomer := stripeEvent(t, "evt_only_and_other", "invoice.paid", "cus_other")
	expectIgnored(t, "another customer", send(t, tester.Client, otherCustomer), up, otherCustomer)
	otherType := stripeEvent(t, "evt_only_and_type", "customer.updated", "cus_vip")
	expectIgnored(t, "another type", send(t, tester.Client, otherType), up, otherType)
	curl := stripeEvent(t, "evt_only_and_curl", "invoice.paid", "cus_vip")
	curl.Headers.Set("User-Agent", "curl/8.5.0")
	expectIgnored(t, "another User-Agent", send(t, tester.Client, curl), up, curl)
	if n := up.Total(); n != 2 {
		t.Fatalf("the app got %d events, want 2", n)
	}
}

// In async mode an ignored event is answered 200 at once and never queued: once the backlog is
// empty, the app has got the matching events only, and the ignored one is not listed.
func TestAsyncOnlyQueuesMatchingEventsOnly(t *testing.T) {
	const route = "only_async"
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	tester.InitServer(handshakeConfig("stripe", route, unusedUpstream,
		asyncRoute(up.Listener.Addr().String()), "only json type invoice.paid customer.*"), "caddyfile")

	ignored := stripeEvent(t, "evt_only_async_created", "invoice.created", "cus_1")
	expectIgnored(t, "a type the route leaves out", send(t, tester.Client, ignored), up, ignored)
	for _, ev := range []*hooktest.Event{
		stripeEvent(t, "evt_only_async_paid", "invoice.paid", "cus_1"),
		stripeEvent(t, "evt_only_async_customer", "customer.deleted", "cus_1"),
	} {
		hooktest.ExpectReply(t, ev.ID, send(t, tester.Client, ev), http.StatusAccepted, `{"received":true,"id":"`+ev.ID+`"}`)
	}
	// Anything queued is delivered before the backlog is empty: the app answers 200.
	hooktest.WaitFor(t, "the matching events' delivery, and an empty backlog", 10*time.Second, func() bool {
		backlog, _ := routeBacklog(t, route)
		return backlog == 0 && up.Count("evt_only_async_paid") == 1 && up.Count("evt_only_async_customer") == 1
	})
	if status, body := admin(t, http.MethodGet, "/hookgate/events/"+route+"?id="+ignored.ID); status != http.StatusNotFound {
		t.Fatalf("the ignored event is listed: %d %s", status, body)
	}
	if n := up.Total(); n != 2 || strings.Contains(strings.Join(up.Bodies, ""), ignored.ID) {
		t.Fatalf("the app got %d events (%q), want the 2 matching ones", n, up.Bodies)
	}
	if got := scrape(t)[`hookgate_requests_total{mode="enforce",outcome="ignored",reason="",route="`+route+`"}`]; got != 1 {
		t.Fatalf("counted ignored %v, want 1", got)
	}
}

// A monitored route drops nothing, its `only` lines included: an event they leave out goes on to
// the app as it came, unclaimed and without Hookgate-Verified, and is counted ignored.
func TestMonitorHandsOnEventsTheFiltersWouldIgnore(t *testing.T) {
	const route = "only_monitored"
	up := hooktest.NewUpstream(t)
	tester := startStripeGateway(t, route, up, "only json type invoice.paid", "monitor")
	ignored := fmt.Sprintf(`hookgate_requests_total{mode="monitor",outcome="ignored",reason="",route=%q}`, route)
	before := scrape(t)[ignored]

	ev := stripeEvent(t, "evt_only_monitored", "invoice.created", "cus_1")
	got := send(t, tester.Client, ev)
	hooktest.ExpectReply(t, "an event the filter leaves out", got, http.StatusOK, "upstream says hi")
	if n := up.Total(); n != 1 {
		t.Fatalf("the app got %d requests, want the event once: monitor drops nothing", n)
	}
	up.Mu.Lock()
	verified := up.Headers[len(up.Headers)-1].Get("Hookgate-Verified")
	up.Mu.Unlock()
	if verified != "" {
		t.Errorf("the app got Hookgate-Verified %q with an event hookgate would have ignored", verified)
	}
	if d := scrape(t)[ignored] - before; d != 1 {
		t.Errorf("%s went up by %v, want 1", ignored, d)
	}
	out, err := runHookgateCLIAt("localhost:2999", "status", route)
	if err != nil || !strings.Contains(out, `"ignored": 1,`) {
		t.Errorf("caddy hookgate status %s: %q, %v; want ignored 1", route, out, err)
	}
}
