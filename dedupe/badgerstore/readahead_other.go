//go:build !linux

package badgerstore

// readAround is 0 where the kernel's readahead of mapped files is not known
// to read around every fault: the store advises nothing (readahead.go).
func readAround(string) (int, error) { return 0, nil }

// mappedFiles is not used there.
type mappedFiles struct{}

func newMappedFiles(string) *mappedFiles { return &mappedFiles{} }

func (*mappedFiles) adviseRandomReads() error { return nil }
