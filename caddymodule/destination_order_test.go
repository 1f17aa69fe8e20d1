package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

func TestUnmarshalCaddyfileOrder(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`hookgate {
		forward billing http://127.0.0.1:1 {
			order json data.object.id
			on_dead skip
		}
	}`)); err != nil {
		t.Fatal(err)
	}
	if f := h.Forwards[0]; f.Order == nil || f.Order.From != "json" || f.Order.Name != "data.object.id" || f.OnDead != "skip" {
		t.Fatalf("parsed %+v", f)
	}
	for input, wantErr := range map[string]string{
		"hookgate {\n forward http://x {\n order json\n}\n}":               "order takes",
		"hookgate {\n forward http://x {\n order body x\n}\n}":             "order source",
		"hookgate {\n forward http://x {\n order json a\n on_dead x\n}\n}": "on_dead",
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: %v, want an error containing %q", input, err, wantErr)
		}
	}
}

// An ordered destination gets each key's events in the order hookgate acknowledged them, with
// their Hookgate-Sequence; an event it takes without the key is refused 400, naming the key.
func TestAnOrderedDestinationDeliversEachKeyInOrder(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startFanOutGateway(t, fastForward("billing", up.Listener.Addr().String(), "order header X-Order-Key"))
	for i := range 30 {
		ev := typedEvent(t, fmt.Sprintf("evt_order_%02d", i), "invoice.paid", fmt.Sprintf("in_order_%d", i), 1)
		ev.Headers.Set("X-Order-Key", fmt.Sprint(i%3))
		hooktest.ExpectReply(t, ev.ID, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "every event", 10*time.Second, func() bool { return up.Distinct() == 30 })
	up.Mu.Lock()
	last := map[string]int{}
	for _, h := range up.Headers {
		key, seq := h.Get("X-Order-Key"), h.Get("Hookgate-Sequence")
		n, err := strconv.Atoi(seq)
		if err != nil || n < last[key] {
			t.Errorf("%s of key %s arrived with sequence %q after %d", h.Get("Hookgate-Event-Id"), key, seq, last[key])
		}
		last[key] = n
	}
	up.Mu.Unlock()
	keyless := typedEvent(t, "evt_order_keyless", "invoice.paid", "in_order_keyless", 1)
	hooktest.ExpectReply(t, "an event without the key", send(t, tester.Client, keyless), http.StatusBadRequest, "order key: header X-Order-Key is missing")
}

// A dead letter of an ordered destination holds its key (on_dead hold, the default): the later
// events of its key wait, other keys flow, and status and /metrics count the held key; skipping
// it from the CLI lets the next go on and keeps it a dead letter.
func TestADeadHeadHoldsItsKeyUntilSkipped(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusBadRequest) // refused for good: each event dies at its first attempt
	tester := startFanOutGateway(t, fastForward("billing", up.Listener.Addr().String(), "order header X-Order-Key", "max_attempts 1"))
	send1 := func(id, key string) {
		ev := typedEvent(t, id, "invoice.paid", "in_"+id, 1)
		ev.Headers.Set("X-Order-Key", key)
		hooktest.ExpectReply(t, id, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	send1("evt_hold_1", "k")
	hooktest.WaitFor(t, "the head dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/fanout?dest=billing&id=evt_hold_1")
		return strings.Contains(body, `"state":"dead"`)
	})
	up.Status.Store(http.StatusOK)
	send1("evt_hold_2", "k")
	send1("evt_hold_3", "j")
	hooktest.WaitFor(t, "the other key's event", 10*time.Second, func() bool { return up.Count("evt_hold_3") == 1 })
	if status, body := admin(t, http.MethodGet, "/hookgate/status/fanout?dest=billing"); status != http.StatusOK || !strings.Contains(body, `"held_keys":1`) {
		t.Errorf("status: %d %s, want one held key", status, body)
	}
	if got := scrape(t)[`hookgate_order_keys_held{destination="billing",route="fanout"}`]; got != 1 {
		t.Errorf("hookgate_order_keys_held: %v, want 1", got)
	}
	if up.Count("evt_hold_2") != 0 {
		t.Fatal("the event behind the held head was delivered")
	}
	if out, err := runHookgateCLIAt("localhost:2999", "skip", "fanout", "evt_hold_1", "--dest", "billing"); err != nil || !strings.Contains(out, `"skipped": 1`) {
		t.Fatalf("caddy hookgate skip: %v\n%s", err, out)
	}
	hooktest.WaitFor(t, "the event behind it, once skipped", 10*time.Second, func() bool { return up.Count("evt_hold_2") == 1 })
	if _, body := admin(t, http.MethodGet, "/hookgate/events/fanout?dest=billing&id=evt_hold_1"); !strings.Contains(body, `"state":"dead"`) {
		t.Errorf("the skipped head: %s, want a dead letter still", body)
	}
	if _, err := runHookgateCLIAt("localhost:2999", "skip", "fanout", "evt_hold_1", "--dest", "billing"); err == nil || !strings.Contains(err.Error(), "holds no key") {
		t.Errorf("skipping it again: %v, want 409 holds no key", err)
	}
}

// A held dead letter whose key's waiting events fill max_pending can still be replayed: its replay
// is what lets them go.
func TestAHeldHeadIsReplayedAtMaxPending(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusBadRequest)
	tester := startFanOutGateway(t, fastForward("billing", up.Listener.Addr().String(), "order header X-Order-Key", "max_attempts 1", "max_pending 2"))
	send1 := func(id string, want int) {
		ev := typedEvent(t, id, "invoice.paid", "in_"+id, 1)
		ev.Headers.Set("X-Order-Key", "k")
		hooktest.ExpectReply(t, id, send(t, tester.Client, ev), want, "")
	}
	send1("evt_full_1", http.StatusAccepted)
	hooktest.WaitFor(t, "the head dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/fanout?dest=billing&id=evt_full_1")
		return strings.Contains(body, `"state":"dead"`)
	})
	up.Status.Store(http.StatusOK)
	send1("evt_full_2", http.StatusAccepted)
	send1("evt_full_3", http.StatusAccepted)
	send1("evt_full_4", http.StatusServiceUnavailable) // the key's waiting events fill max_pending
	if status, body := admin(t, http.MethodPost, "/hookgate/replay/fanout?dest=billing&id=evt_full_1"); status != http.StatusOK {
		t.Fatalf("replaying the held head at max_pending: %d %s", status, body)
	}
	hooktest.WaitFor(t, "the key drained in order", 10*time.Second, func() bool {
		return up.Count("evt_full_1") == 2 && up.Count("evt_full_2") == 1 && up.Count("evt_full_3") == 1
	})
}

// Order composes with version: a retrying head whose entity has a newer version delivered
// (from another key) is recorded superseded at its next turn, not sent, and the events of its key
// behind it go on.
func TestASupersededHeadIsSkippedNotWaitedFor(t *testing.T) {
	var mu sync.Mutex
	var arrivals []string // event IDs the app answered 200, in order; "-"+ID for a 503
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookgate-Event-Id")
		mu.Lock()
		defer mu.Unlock()
		if id == "evt_sup_old" {
			arrivals = append(arrivals, "-"+id)
			w.WriteHeader(http.StatusServiceUnavailable) // the old version's head keeps retrying
			return
		}
		arrivals = append(arrivals, id)
	}))
	t.Cleanup(app.Close)
	arrived := func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(arrivals, id)
	}
	tester := startFanOutGateway(t, fastForward("billing", app.Listener.Addr().String(), "order header X-Order-Key"))
	send1 := func(id, entity string, version int, key string) {
		ev := typedEvent(t, id, "invoice.paid", entity, version)
		ev.Headers.Set("X-Order-Key", key)
		hooktest.ExpectReply(t, id, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	send1("evt_sup_old", "in_sup", 1, "cus_a")
	hooktest.WaitFor(t, "the old version attempted", 10*time.Second, func() bool { return arrived("-evt_sup_old") })
	send1("evt_sup_behind", "in_other", 1, "cus_a") // waits behind the retrying head
	send1("evt_sup_new", "in_sup", 2, "cus_b")      // the entity's newer version, in another key
	hooktest.WaitFor(t, "the event behind the superseded head", 10*time.Second, func() bool { return arrived("evt_sup_behind") })
	if _, body := admin(t, http.MethodGet, "/hookgate/events/fanout?dest=billing&id=evt_sup_old"); !strings.Contains(body, `"state":"superseded"`) {
		t.Errorf("the old version's head: %s, want superseded", body)
	}
	mu.Lock()
	defer mu.Unlock()
	newAt := slices.Index(arrivals, "evt_sup_new")
	if newAt < 0 || slices.Contains(arrivals[newAt:], "-evt_sup_old") || slices.Index(arrivals, "evt_sup_behind") < newAt {
		t.Errorf("arrivals %v: want the old version never sent once the new one was delivered, and the event behind it after", arrivals)
	}
}

// A route's lone forward orders by a JSON path: each customer's events arrive in the order they
// were acknowledged, though every event's first attempt fails; a JSON event without the path is
// refused 400, naming it.
func TestALoneForwardOrdersByAJSONPath(t *testing.T) {
	var mu sync.Mutex
	tried := map[string]bool{}
	taken := map[string][]string{} // customer → event IDs taken, in order
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookgate-Event-Id")
		mu.Lock()
		defer mu.Unlock()
		if !tried[id] {
			tried[id] = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		customer := id[len("evt_json_") : len("evt_json_")+2]
		taken[customer] = append(taken[customer], id)
	}))
	t.Cleanup(app.Close)
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("orderjson", unusedUpstream, fmt.Sprintf(
		"forward http://%s {\n\t\t\tbackoff 20ms\n\t\t\tjitter none\n\t\t\tpause_after 1000\n\t\t\torder json data.object.customer\n\t\t}",
		app.Listener.Addr().String())), "caddyfile")
	event := func(id, object string) *hooktest.Event {
		return hooktest.SignedEvent(t, id, `{"type":"invoice.paid","data":{"object":`+object+`}}`, time.Now(), hooktest.Secret)
	}
	const perCustomer = 10
	var want = map[string][]string{}
	for i := range perCustomer {
		for _, customer := range []string{"c1", "c2", "c3"} {
			id := fmt.Sprintf("evt_json_%s_%02d", customer, i)
			ev := event(id, fmt.Sprintf(`{"id":"in_%s","updated":%d,"customer":"%s"}`, id, i+1, customer))
			hooktest.ExpectReply(t, id, send(t, tester.Client, ev), http.StatusAccepted, "")
			want[customer] = append(want[customer], id)
		}
	}
	hooktest.WaitFor(t, "every event taken", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(taken["c1"])+len(taken["c2"])+len(taken["c3"]) >= 3*perCustomer
	})
	mu.Lock()
	for customer, ids := range want {
		if !slices.Equal(taken[customer], ids) {
			t.Errorf("customer %s: taken %v, want %v", customer, taken[customer], ids)
		}
	}
	mu.Unlock()
	keyless := event("evt_json_keyless", `{"id":"in_keyless","updated":1}`)
	hooktest.ExpectReply(t, "an event without the key", send(t, tester.Client, keyless), http.StatusBadRequest, "order key: JSON field data.object.customer is missing")
}

// A reload that removes `order` leaves the events already in a key's order waiting there (the
// store keeps their order). One of them that dies afterwards must not hold its key: the
// destination is unordered now, so nothing would show the held key (no held_keys in the status,
// no hookgate_order_keys_held, no alert), and the events behind it would wait unseen for good.
func TestRemovingOrderLetsALeftoverDeadEventsKeyGo(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusServiceUnavailable)
	addr := up.Listener.Addr().String()
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("orderoff", unusedUpstream, fastForward("billing", addr, "order header X-Order-Key", "max_attempts 1000")), "caddyfile")
	suffix := fmt.Sprint(time.Now().UnixNano())
	head, behind := "evt_orderoff_1_"+suffix, "evt_orderoff_2_"+suffix
	for _, id := range []string{head, behind} {
		ev := typedEvent(t, id, "invoice.paid", "in_"+id, 1)
		ev.Headers.Set("X-Order-Key", "k"+suffix)
		hooktest.ExpectReply(t, id, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "the head attempted", 10*time.Second, func() bool { return up.Count(head) >= 1 })

	tester.InitServer(gatewayConfig("orderoff", unusedUpstream, fastForward("billing", addr, "max_attempts 1")), "caddyfile")
	hooktest.WaitFor(t, "the head dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/orderoff?dest=billing&id="+head)
		return strings.Contains(body, `"state":"dead"`)
	})
	up.Status.Store(http.StatusOK)
	hooktest.WaitFor(t, "the event that waited behind it delivered", 10*time.Second, func() bool { return up.Count(behind) == 1 })
}

// A key held when a reload removes `order` stays held (a reload releases nothing): the status and
// /metrics go on counting it, so the alert still fires and the operator finds it to skip.
func TestAKeyHeldWhenOrderIsRemovedStaysInSight(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusBadRequest)
	addr := up.Listener.Addr().String()
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("orderoffheld", unusedUpstream, fastForward("billing", addr, "order header X-Order-Key", "max_attempts 1")), "caddyfile")
	suffix := fmt.Sprint(time.Now().UnixNano())
	head := "evt_orderoffheld_" + suffix
	ev := typedEvent(t, head, "invoice.paid", "in_"+head, 1)
	ev.Headers.Set("X-Order-Key", "k"+suffix)
	hooktest.ExpectReply(t, head, send(t, tester.Client, ev), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the head dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/orderoffheld?dest=billing&id="+head)
		return strings.Contains(body, `"holds":true`)
	})

	tester.InitServer(gatewayConfig("orderoffheld", unusedUpstream, fastForward("billing", addr, "max_attempts 1")), "caddyfile")
	if status, body := admin(t, http.MethodGet, "/hookgate/status/orderoffheld?dest=billing"); status != http.StatusOK || !strings.Contains(body, `"held_keys":1`) {
		t.Errorf("status after order was removed: %d %s, want the held key counted", status, body)
	}
	if got := scrape(t)[`hookgate_order_keys_held{destination="billing",route="orderoffheld"}`]; got != 1 {
		t.Errorf("hookgate_order_keys_held after order was removed: %v, want 1", got)
	}
}

// The status names the held keys and their dead heads (the first 10 by key), with the events
// waiting behind each: the dead-letter page shows the oldest dead letters only, and a held head
// may be behind many others, so this is where an alerted operator finds the ID to skip or replay.
func TestStatusNamesTheHeldKeysAndTheirHeads(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusBadRequest)
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("heldnames", unusedUpstream, fastForward("billing", up.Listener.Addr().String(), "order header X-Order-Key", "max_attempts 1")), "caddyfile")
	suffix := fmt.Sprint(time.Now().UnixNano())
	head, behind := "evt_heldnames_1_"+suffix, "evt_heldnames_2_"+suffix
	send1 := func(id string) {
		ev := typedEvent(t, id, "invoice.paid", "in_"+id, 1)
		ev.Headers.Set("X-Order-Key", "k"+suffix)
		hooktest.ExpectReply(t, id, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	send1(head)
	hooktest.WaitFor(t, "the head dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/heldnames?dest=billing&id="+head)
		return strings.Contains(body, `"holds":true`)
	})
	send1(behind)
	want := fmt.Sprintf(`"held":[{"key":"k%s","head":"%s",`, suffix, head)
	if status, body := admin(t, http.MethodGet, "/hookgate/status/heldnames?dest=billing"); status != http.StatusOK || !strings.Contains(body, want) || !strings.Contains(body, `"waiting":1}]`) {
		t.Errorf("status: %d %s, want it to contain %s … \"waiting\":1", status, body, want)
	}
}
