package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Claim implements dedupe.Ledger in one script: the claim is a key set with NX and PX, so it
// lapses by itself after c.Lease if its holder dies, and two nodes never both hold it. On
// error the Outcome is meaningless.
func (s *Store) Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error) {
	if c.ID != "" && c.Lease <= 0 {
		return 0, fmt.Errorf("redisstore: claim: lease must be positive, got %v", c.Lease)
	}
	t, err := s.tag(c.Namespace)
	if err != nil {
		return 0, fmt.Errorf("redisstore: claim: %w", err)
	}
	// The claim holds a token of this call: run again by go-redis after a lost reply, the
	// script finds the claim its first run made, and answers Claimed again.
	args := append([]any{millis(c.Lease), c.Entity, strconv.FormatInt(c.Version, 10), rand.Text()}, dedupeKeys(c)...)
	res, err := claimScript.Run(ctx, s.perRequest, claimKeys(t, c), args...).Text()
	if err != nil {
		return 0, fmt.Errorf("redisstore: claim: %w", err)
	}
	out, err := outcome(res)
	if err != nil {
		return 0, fmt.Errorf("redisstore: claim: %w", err)
	}
	return out, nil
}

// Done implements dedupe.Ledger in one script. As with Badger, the ID is marked done even if
// this caller's claim had lapsed and another request took it over: the work was done. It
// returns once Redis has answered the write.
func (s *Store) Done(ctx context.Context, c dedupe.Claim, ttl time.Duration) error {
	if c.ID != "" && ttl <= 0 {
		return fmt.Errorf("redisstore: done: ttl must be positive, got %v", ttl)
	}
	t, err := s.tag(c.Namespace)
	if err != nil {
		return fmt.Errorf("redisstore: done: %w", err)
	}
	ids := dedupeKeys(c)
	if len(ids) == 0 && c.Entity == "" {
		return nil
	}
	args := append([]any{millis(ttl), c.Entity, strconv.FormatInt(c.Version, 10), millis(c.VersionTTL)}, ids...)
	if err := doneScript.Run(ctx, s.perRequest, claimKeys(t, c), args...).Err(); err != nil {
		return fmt.Errorf("redisstore: done: %w", err)
	}
	return nil
}

// Release implements dedupe.Ledger in one script; it never removes a done record. Claims carry
// no owner, so, as with Badger, a caller whose claim lapsed and was taken over releases the newer
// claim too: that lets one more delivery through, which at-least-once delivery allows.
func (s *Store) Release(ctx context.Context, c dedupe.Claim) error {
	t, err := s.tag(c.Namespace)
	if err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	ids := dedupeKeys(c)
	if len(ids) == 0 {
		return nil
	}
	if err := releaseScript.Run(ctx, s.perRequest, claimKeys(t, c), ids...).Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}

// dedupeKeys are the key suffixes that deduplicate c: its ID's, then its digest's if it has
// one; none when c.ID is "" (dedupe off). Each holds "c" and the claiming call's token while
// claimed, and "d" once done.
func dedupeKeys(c dedupe.Claim) []any {
	if c.ID == "" {
		return nil
	}
	ids := []any{"i:" + c.ID}
	if c.Digest != "" {
		ids = append(ids, "h:"+c.Digest)
	}
	return ids
}

// claimKeys are the keys the ledger's scripts of c declare (see scriptKeys): its dedupe keys
// and its entity's version.
func claimKeys(t string, c dedupe.Claim) []string {
	var suffixes []string
	for _, id := range dedupeKeys(c) {
		suffixes = append(suffixes, id.(string))
	}
	if c.Entity != "" {
		suffixes = append(suffixes, "v:"+c.Entity)
	}
	return scriptKeys(t, suffixes...)
}

// outcome is the dedupe.Outcome a script named.
func outcome(name string) (dedupe.Outcome, error) {
	for _, o := range []dedupe.Outcome{dedupe.Claimed, dedupe.Duplicate, dedupe.InFlight, dedupe.Stale, dedupe.Full} {
		if o.String() == name {
			return o, nil
		}
	}
	return 0, fmt.Errorf("unexpected reply %q from the script", name)
}

// millis is d in whole milliseconds for PX and PEXPIRE, rounded up so a positive duration
// never becomes 0 (which Redis refuses).
func millis(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}
