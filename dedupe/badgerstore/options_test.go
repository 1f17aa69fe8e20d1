package badgerstore

import "testing"

// The heap Badger takes is fixed, not per event: two small memtables, small table builders, and
// no cache of blocks or indexes (an unencrypted table's index is read from its mapped file, so an
// index cache would only hold memory). docs/operations.md sizes memory from these.
func TestBadgerKeepsAFixedHeapWithNoCaches(t *testing.T) {
	opts := badgerOptions(t.TempDir())
	if opts.BlockCacheSize != 0 || opts.IndexCacheSize != 0 {
		t.Errorf("block cache %d, index cache %d bytes: want none", opts.BlockCacheSize, opts.IndexCacheSize)
	}
	if len(opts.EncryptionKey) != 0 {
		t.Error("encrypted tables need an index cache")
	}
	if memtables := int64(opts.NumMemtables) * opts.MemTableSize; memtables > 8<<20 {
		t.Errorf("memtables take %d MiB (each allocated whole on the heap): want at most 8", memtables>>20)
	}
	if opts.BaseTableSize > 1<<20 || opts.TableSizeMultiplier != 1 {
		t.Errorf("tables of %d KiB growing ×%d a level: each table builder holds twice a table on the heap", opts.BaseTableSize>>10, opts.TableSizeMultiplier)
	}
}
