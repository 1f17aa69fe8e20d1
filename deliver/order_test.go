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
	"github.com/hookgate/hookgate/dedupe/badgerstore"
)

// An ordered destination's events of one key reach the upstream one at a time, in the order the
// store accepted them, each carrying Hookgate-Sequence, and a failing attempt holds back its key
// alone.
func TestAnOrderedKeysEventsArriveInTheirOrder(t *testing.T) {
	store, err := badgerstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
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
