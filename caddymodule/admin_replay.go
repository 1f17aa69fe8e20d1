package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// replayPage is how many dead letters "replay all" reads at a time.
const replayPage = 500

// replay answers POST /hookgate/replay/<route>: one dead letter (id, when named), or, with
// ?all=1, as many as leave room for new events (replayRoom).
func (a *AdminAPI) replay(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer, id string, named bool) error {
	all, asked := r.URL.Query()["all"]
	switch {
	case asked && (len(all) != 1 || all[0] != "1"):
		return apiError(http.StatusBadRequest, errors.New("all must be 1 (?all=1 replays every dead letter)"))
	case asked && named:
		return apiError(http.StatusBadRequest, errors.New("give either an event ID or all=1, not both"))
	case !asked && !named:
		return apiError(http.StatusBadRequest, errors.New("say which dead letter to replay with ?id=<id>, or replay every one with ?all=1"))
	case asked:
		return a.replayAll(w, r, sender)
	}
	bound := sender.config().MaxPending
	full, err := replayIfRoom(r.Context(), sender, id, bound)
	var unread *backlogError
	switch {
	case errors.As(err, &unread):
		return apiError(http.StatusServiceUnavailable, err)
	case err != nil:
		return eventError(r.Context(), sender, id, err)
	case full:
		return apiError(http.StatusServiceUnavailable, fmt.Errorf("the backlog of undelivered events is at max_pending (%d): "+
			"a replayed event would take the place of a new one; replay it once deliveries take the backlog below", bound))
	}
	sender.Notify()
	return writeJSON(w, map[string]any{"route": sender.key.name, "replayed": 1})
}

// replayRoom is the backlog up to which "replay all" replays: half of max_pending (rounded up),
// so the other half stays free for new events however many dead letters there are. A replay
// lasts as long as the upstream takes to drain it, and intake must not stop meanwhile (a
// provider that does not retry loses what gets a 503).
func replayRoom(maxPending int) int { return maxPending - maxPending/2 }

// replayAll answers ?all=1: from after ?after= (where an earlier one stopped, its next), or the
// oldest. One that stops with dead letters left says where (next): going on from there, rather
// than from the oldest, reaches the dead letters behind those that fail again slowly, which would
// otherwise take the room on every replay.
func (a *AdminAPI) replayAll(w http.ResponseWriter, r *http.Request, sender *pooledDeliverer) error {
	after, err := parseCursor(r.URL.Query().Get("after"))
	if err != nil {
		return apiError(http.StatusBadRequest, err)
	}
	replayed, left, stopped, err := replayAll(r.Context(), sender, replayRoom(sender.config().MaxPending), after)
	if replayed > 0 {
		sender.Notify()
	}
	if err != nil {
		return storeError(fmt.Errorf("replayed %d, then: %w", replayed, err))
	}
	answer := map[string]any{"route": sender.key.name, "replayed": replayed, "left": left}
	if left > 0 && stopped.ID != "" {
		answer["next"] = formatCursor(stopped)
	}
	return writeJSON(w, answer)
}

// replayAll replays the route's dead letters after the cursor while its backlog is below room,
// and counts those it leaves dead, from stopped (the last one it went past) on. It reads them a
// page at a time, so its memory does not grow with their number (it lists their deliveries, not
// their bodies, which Replay rewrites anyway). It walks them in accept order and stops at those
// accepted after it began: a replayed event that dies again keeps its accept time, behind the
// walk, so it is not replayed twice, and the walk ends however fast new dead letters come.
func replayAll(ctx context.Context, sender *pooledDeliverer, room int, after dedupe.Cursor) (replayed, left int, stopped dedupe.Cursor, err error) {
	began := time.Now()
	for {
		dead, err := sender.queue().ListDeliveries(ctx, sender.key.queue(), dedupe.Dead, after, replayPage)
		if err != nil {
			return replayed, 0, after, err
		}
		for _, ev := range dead {
			if ev.AcceptedAt.After(began) {
				left, err := countDead(ctx, sender, after)
				return replayed, left, after, err
			}
			full, err := replayIfRoom(ctx, sender, ev.ID, room)
			if full {
				left, err := countDead(ctx, sender, after)
				return replayed, left, after, err
			}
			after = ev.After()
			switch {
			case errors.Is(err, dedupe.ErrNotDead) || errors.Is(err, dedupe.ErrNotFound):
				continue // replayed on its own meanwhile, or expired: nothing left to replay
			case err != nil:
				return replayed, 0, after, fmt.Errorf("%s: %w", ev.ID, err)
			}
			replayed++
		}
		if len(dead) < replayPage {
			return replayed, 0, after, nil
		}
	}
}

// replayIfRoom replays the dead letter id unless the route's backlog is at bound or above (full).
// Among this process's replays, reading the backlog and replaying are one step: replays side by
// side (a script replaying IDs in parallel, the page and the CLI at once) would otherwise each see
// room for one more, and together take the backlog past the bound.
func replayIfRoom(ctx context.Context, sender *pooledDeliverer, id string, bound int) (full bool, err error) {
	sender.replaying.Lock()
	defer sender.replaying.Unlock()
	backlog, err := sender.queue().Pending(ctx, sender.key.queue())
	if err != nil {
		return false, &backlogError{err}
	}
	if backlog >= bound && !holdsItsKey(ctx, sender, id) {
		return true, nil
	}
	return false, sender.queue().Replay(ctx, sender.key.queue(), id, time.Now())
}

// holdsItsKey reports whether id is a dead letter holding its key in an ordered queue: its replay
// is let through at max_pending, since the backlog may be the key's own events waiting behind it,
// which only its replay (or a skip) lets go.
func holdsItsKey(ctx context.Context, sender *pooledDeliverer, id string) bool {
	ev, err := sender.queue().Get(ctx, sender.key.queue(), id)
	return err == nil && ev.Holds
}

// backlogError is a failure to read a route's backlog.
type backlogError struct{ err error }

func (e *backlogError) Error() string { return "reading the backlog: " + e.err.Error() }
func (e *backlogError) Unwrap() error { return e.err }

// countDead counts the route's dead letters from after on, a page of deliveries at a time.
func countDead(ctx context.Context, sender *pooledDeliverer, after dedupe.Cursor) (int, error) {
	n := 0
	for {
		dead, err := sender.queue().ListDeliveries(ctx, sender.key.queue(), dedupe.Dead, after, replayPage)
		if err != nil {
			return n, fmt.Errorf("counting the dead letters left: %w", err)
		}
		n += len(dead)
		if len(dead) < replayPage {
			return n, nil
		}
		after = dead[len(dead)-1].After()
	}
}
