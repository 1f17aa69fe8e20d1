package badgerstore

import (
	"bytes"
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
			ns, _, ok := bytes.Cut(it.Item().Key(), []byte{0})
			if !ok {
				return fmt.Errorf("corrupt key %q", it.Item().Key())
			}
			namespace := string(ns)
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
			// The namespace holds no NUL, so every key of the next one sorts at or after ns+"\x01".
			it.Seek(append([]byte(namespace), 1))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
