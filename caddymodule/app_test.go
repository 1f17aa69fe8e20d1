package caddymodule

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// A route renamed away from its queue leaves pending events that nothing delivers: the config's
// start says so, once per namespace, with the count.
func TestWarnsOfPendingEventsNoRouteDelivers(t *testing.T) {
	dir := t.TempDir()
	store, err := ledgerpool.Acquire(ledgerpool.BadgerTarget(dir), ledgerpool.DefaultMinFree, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Detach()
	for _, id := range []string{"evt_1", "evt_2"} {
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/hooks/x", Body: []byte("{}")}
		if _, err := store.Accept(context.Background(), dedupe.Claim{Namespace: "before_rename", ID: id}, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	core, logs := observer.New(zap.WarnLevel)
	app := &App{routes: map[routeKey]*appRoute{}, logger: zap.New(core)}
	if err := app.register(routeKey{store: dir, name: "after_rename"}, store, nil, ledgerpool.DefaultMinFree); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	defer app.Stop()
	hooktest.WaitFor(t, "the warning", 5*time.Second, func() bool { return logs.Len() > 0 })
	time.Sleep(100 * time.Millisecond) // room for a wrong second line
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(entries), entries)
	}
	fields := entries[0].ContextMap()
	if fields["namespace"] != "before_rename" || fields["pending"] != int64(2) {
		t.Fatalf("warning %q with %v, want namespace before_rename and 2 pending", entries[0].Message, fields)
	}
}
