package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// listScan is how many members beyond the limit one run of the list script examines at most,
// and how many expired ones (x) it drops first: members whose event expired and that no trimming
// has reached yet are dropped as it walks past them, and List runs it again from where it stopped.
const listScan = 1000

// DeliveredVersion implements dedupe.Outbox with one GET.
func (s *Store) DeliveredVersion(ctx context.Context, namespace, entity string) (int64, bool, error) {
	_, q, err := s.queue(namespace)
	if err != nil {
		return 0, false, fmt.Errorf("redisstore: delivered version: %w", err)
	}
	v, err := s.client.Get(ctx, q+"w:"+entity).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("redisstore: delivered version: %w", err)
	}
	version, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("redisstore: delivered version: corrupt record: %w", err)
	}
	return version, true, nil
}

// Get implements dedupe.Outbox with one HGETALL of the event's delivery hash in the queue, and
// an HMGET of its shared hash for the header and body of a Pending or Dead delivery of an event
// queued for several destinations; the error wraps dedupe.ErrNotFound for an event that was
// never accepted in the queue or whose retention has passed.
func (s *Store) Get(ctx context.Context, namespace, id string) (*dedupe.Event, error) {
	t, q, err := s.queue(namespace)
	if err != nil {
		return nil, fmt.Errorf("redisstore: get: %w", err)
	}
	fields, err := s.client.HGetAll(ctx, q+"e:"+id).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: get: %w", err)
	}
	if len(fields) == 0 || id == "" {
		return nil, fmt.Errorf("redisstore: get: %q: %w", id, dedupe.ErrNotFound)
	}
	if fields[fieldShared] != "" && live(dedupe.State(fields[fieldState])) {
		shared, err := s.client.HMGet(ctx, t+"p:"+id, fieldHeader, fieldBody).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: get: %w", err)
		}
		for i, f := range []string{fieldHeader, fieldBody} {
			if v, ok := shared[i].(string); ok {
				fields[f] = v
			}
		}
	}
	ev, err := decodeEvent(namespace, id, fields)
	if err != nil {
		return nil, fmt.Errorf("redisstore: get: %w", err)
	}
	return ev, nil
}

// List implements dedupe.Outbox in one script (more runs only past members of expired events),
// reading the state's listing, whose members sort
// by accept time and then ID (listMember), from the cursor on. It leaves out the header and
// body. A limit <= 0 returns nothing.
func (s *Store) List(ctx context.Context, namespace string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	switch state {
	case dedupe.Pending, dedupe.Delivered, dedupe.Dead, dedupe.Superseded:
	default:
		return nil, fmt.Errorf("redisstore: list: unknown state %q", state)
	}
	_, q, err := s.queue(namespace)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list: %w", err)
	}
	if limit <= 0 {
		return nil, nil
	}
	start := "-"
	switch {
	case after.ID != "":
		start = "(" + listMember(after.AcceptedAt, after.ID)
	case !after.AcceptedAt.IsZero():
		start = "[" + listMember(after.AcceptedAt, "")
	}
	keys := scriptKeys(q, "x", "s:"+string(dedupe.Pending), "s:"+string(dedupe.Delivered), "s:"+string(dedupe.Dead),
		"s:"+string(dedupe.Superseded))
	var out []*dedupe.Event
	for {
		args := []any{string(state), start, strconv.Itoa(limit - len(out)), strconv.Itoa(limit - len(out) + listScan)}
		for _, f := range listFields {
			args = append(args, f)
		}
		reply, err := listScript.Run(ctx, s.client, keys, args...).Slice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: list: %w", err)
		}
		if len(reply) == 0 {
			return nil, fmt.Errorf("redisstore: list: empty reply from the script")
		}
		for _, r := range reply[1:] {
			ev, err := listedEvent(namespace, r)
			if err != nil {
				return nil, fmt.Errorf("redisstore: list: %w", err)
			}
			out = append(out, ev)
		}
		// The script stops after examining its most members (those of expired events it drops
		// on the way): the next run goes on from there, so a listing full of them is still read.
		resume, _ := reply[0].(string)
		if resume == "" || len(out) >= limit {
			return out, nil
		}
		start = resume
	}
}

// listedEvent decodes one of the list script's rows: the ID, then listFields' values.
func listedEvent(namespace string, row any) (*dedupe.Event, error) {
	values, ok := row.([]any)
	if !ok || len(values) != 1+len(listFields) {
		return nil, fmt.Errorf("unexpected reply %T from the script", row)
	}
	id, _ := values[0].(string)
	fields := make(map[string]string, len(listFields))
	for i, f := range listFields {
		fields[f], _ = values[1+i].(string)
	}
	return decodeEvent(namespace, id, fields)
}

// Pending is the backlog of the queue of namespace (dedupe.QueueNamespace): its number of
// Pending events, being attempted or not, exactly (the size of its Pending listing).
func (s *Store) Pending(ctx context.Context, namespace string) (int, error) {
	_, q, err := s.queue(namespace)
	if err != nil {
		return 0, fmt.Errorf("redisstore: pending: %w", err)
	}
	n, err := s.client.ZCard(ctx, q+"s:"+string(dedupe.Pending)).Result()
	if err != nil {
		return 0, fmt.Errorf("redisstore: pending: %w", err)
	}
	return int(n), nil
}
