package deliver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookgate/hookgate/dedupe"
)

// An ordered destination's events of one key reach the upstream one at a time, in the order the
// store accepted them, each carrying Hookgate-Sequence, and a failing attempt holds back its key
// alone.
func TestAnOrderedKeysEventsArriveInTheirOrder(t *testing.T) {
	store := openBadger(t)
	route := "orders"
	queue := dedupe.QueueNamespace(route, "billing")
	const perKey = 60
	for i := range perKey {
		for _, key := range []string{"a", "b"} {
			id := fmt.Sprintf("evt_%s_%02d", key, i)
			c := dedupe.Claim{Namespace: route, Destinations: []dedupe.Destination{{Name: "billing", OrderKey: key}}}
			ev := &dedupe.Event{ID: id, Method: http.MethodPost, URI: "/hooks", Body: []byte("{}")}
			if _, err := store.Accept(context.Background(), c, ev, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	up := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%7 == 0 { // now and then an attempt fails, and is retried
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	cfg := testConfig(t, up.URL)
	cfg.Workers = 8
	d := New(store, queue, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	d.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Stop(ctx)
	})
	waitFor(t, 30*time.Second, "every event delivered", func() bool {
		pending, err := store.List(context.Background(), queue, dedupe.Pending, dedupe.Cursor{}, 1)
		return err == nil && len(pending) == 0
	})
	last := map[string]uint64{}
	for _, r := range up.received() {
		id := r.Header.Get("Hookgate-Event-Id")
		seq, err := strconv.ParseUint(r.Header.Get("Hookgate-Sequence"), 10, 64)
		if err != nil {
			t.Fatalf("%s: Hookgate-Sequence %q", id, r.Header.Get("Hookgate-Sequence"))
		}
		key := id[4:5]
		if seq < last[key] {
			t.Fatalf("%s (seq %d) reached the upstream after seq %d of its key", id, seq, last[key])
		}
		last[key] = seq
	}
}

// A key whose events are versions of one entity (order key and entity the same path, as with
// `order json data.object.id` beside `version json data.object.id …`) goes on at the pace of its
// deliveries: the next event, made due by the outcome that ends its head, is not met while the
// head's entity still counts as in work, and postponed by a second (entityBusyDelay) every time.
func TestAnOrderedKeyOfOneEntityIsNotPacedByTheEntityPostponement(t *testing.T) {
	store := openBadger(t)
	route := "orders"
	queue := dedupe.QueueNamespace(route, "billing")
	const keys, perKey = 10, 20
	const events = keys * perKey
	for i := range perKey {
		for k := range keys {
			id, key := fmt.Sprintf("evt_%d_%02d", k, i), fmt.Sprintf("cus_%d", k)
			c := dedupe.Claim{Namespace: route, ID: id, Entity: key, Version: int64(i + 1),
				Destinations: []dedupe.Destination{{Name: "billing", OrderKey: key}}}
			ev := &dedupe.Event{ID: id, Entity: key, Version: int64(i + 1), Method: http.MethodPost, URI: "/hooks", Body: []byte("{}")}
			if out, err := store.Accept(context.Background(), c, ev, time.Hour); err != nil || out != dedupe.Claimed {
				t.Fatalf("accept %s: %v %v", id, out, err)
			}
		}
	}
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 8
	d := New(store, queue, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	start := time.Now()
	run(t, d)
	// One a second per key would take 20 s; a local store and upstream do them all in well
	// under a second.
	waitFor(t, 8*time.Second, "every event delivered", func() bool { return up.count() >= events })
	t.Logf("%d events of %d keys, each one entity, delivered in %v", events, keys, time.Since(start))
	next := map[string]int{}
	for _, r := range up.received() {
		id := r.Header.Get("Hookgate-Event-Id")
		k, i := id[4:5], int(id[6]-'0')*10+int(id[7]-'0')
		if i != next[k] {
			t.Fatalf("%s arrived when %d of its key was next", id, next[k])
		}
		next[k]++
	}
}
