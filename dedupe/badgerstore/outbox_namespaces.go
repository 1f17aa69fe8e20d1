package badgerstore

import (
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// PendingByNamespace counts the Pending events of every namespace that has any, so that a
// caller can tell an operator about events no route will deliver (say a route was renamed).
// It reads keys only: it seeks from one namespace to the next and walks each one's pending
// state index, so its cost is the number of pending events, not the size of the ledger.
func (b *Store) PendingByNamespace(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	err := b.view(ctx, "pending by namespace", func(txn *badger.Txn) error {
		it := keyIterator(txn, nil)
		defer it.Close()
		for it.Rewind(); it.Valid(); {
			if err := ctx.Err(); err != nil {
				return err
			}
			if b.use.stopping() {
				return errClosed
			}
			namespace, ok := namespaceOf(it.Item().Key())
			if !ok {
				return fmt.Errorf("corrupt key %q", it.Item().Key())
			}
			prefix, err := key(namespace, kindState, string(dedupe.Pending)+"\x00")
			if err != nil {
				return err
			}
			n := 0
			for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
				n++
			}
			if n > 0 {
				counts[namespace] = n
			}
			// Every key of the namespace starts "<namespace>\x00", so the next one's sort at or
			// after "<namespace>\x01"; a route's queues sort before its own keys, so they were
			// counted before the walk came to the route's own.
			it.Seek(append([]byte(namespace), 1))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
