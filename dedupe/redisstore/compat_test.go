package redisstore

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// An event queued by an earlier release, whose hash holds every field (zeros too, which Accept
// now leaves out), is leased, delivered, listed and read back as it was stored, and a Pending one
// is retried: an upgrade finds the queue it left.
func TestEventsStoredWithEveryFieldAreDeliveredAfterAnUpgrade(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	tag, _ := s.tag(ns)
	header := http.Header{"Content-Type": {"application/json"}}
	for _, id := range []string{"old1", "old2"} {
		member := listMember(base, id)
		if err := s.client.HSet(ctx, tag+"e:"+id,
			"st", "pending", "att", "0", "ls", "0", "le", "", "acc", nanos(base), "upd", nanos(base), "nxt", nanos(base),
			"tok", "0", "ent", "", "ver", "0", "m", "POST", "u", "/hook", "sch", "stripe", "bb", "2",
			"hdr", encodeHeader(header), "body", "{}", "lx", member).Err(); err != nil {
			t.Fatal(err)
		}
		s.client.ZAdd(ctx, tag+"q", redis.Z{Score: float64(base.UnixMicro()), Member: id})
		s.client.ZAdd(ctx, tag+"s:pending", redis.Z{Member: member})
	}
	evs := lease(t, s, base, 10)
	if len(evs) != 2 {
		t.Fatalf("leased %v, want old1 and old2", ids(evs))
	}
	for _, ev := range evs {
		want := &dedupe.Event{Namespace: ns, ID: ev.ID, Method: "POST", URI: "/hook", Scheme: "stripe", Header: header,
			Body: []byte("{}"), BodyBytes: 2, State: dedupe.Pending, NextAttempt: base.Add(time.Minute).UTC(),
			AcceptedAt: base.UTC(), UpdatedAt: base.UTC(), LeaseToken: 1}
		if !reflect.DeepEqual(ev, want) {
			t.Fatalf("leased\n%+v, want\n%+v", ev, want)
		}
	}
	evs[0].State, evs[0].Attempts, evs[0].LastStatus = dedupe.Delivered, 1, 200
	evs[1].Attempts, evs[1].LastStatus, evs[1].NextAttempt = 1, 503, base.Add(time.Second)
	for _, ev := range evs {
		if err := s.Update(ctx, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(ctx, ns, evs[0].ID)
	if err != nil || got.State != dedupe.Delivered || got.Attempts != 1 || got.LastStatus != 200 || got.Body != nil {
		t.Fatalf("Get of the delivered one: %+v, %v", got, err)
	}
	listed, err := s.List(ctx, ns, dedupe.Delivered, dedupe.Cursor{}, 10)
	if err != nil || len(listed) != 1 || listed[0].ID != evs[0].ID {
		t.Fatalf("List of delivered events: %v, %v", ids(listed), err)
	}
	again := lease(t, s, base.Add(time.Second), 10)
	if len(again) != 1 || again[0].ID != evs[1].ID || again[0].Attempts != 1 || again[0].LeaseToken != 2 || string(again[0].Body) != "{}" {
		t.Fatalf("leased again %+v, want %s with its attempt and body", again, evs[1].ID)
	}
}
