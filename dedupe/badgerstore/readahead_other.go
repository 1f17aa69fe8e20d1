//go:build !linux

package badgerstore

// mappedFiles advises nothing where the kernel's readahead of mapped files is
// not known to read around every fault (readahead.go).
type mappedFiles struct{}

func newMappedFiles(string) *mappedFiles { return &mappedFiles{} }

func (*mappedFiles) adviseRandomReads() error { return nil }
