package dedupe

import (
	"fmt"
	"strconv"
	"time"
)

// Unix nanoseconds in an int64 only cover these years; outside them
// time.Time.UnixNano is undefined, so such times are refused rather than
// silently wrapped into a wrong order.
var (
	minVersionTime = time.Unix(0, -1<<63)
	maxVersionTime = time.Unix(0, 1<<63-1)
)

// ParseVersion turns a version as found in a payload into a comparable int64:
// a base-10 integer as is, an RFC 3339 (nano) time as Unix nanoseconds.
// Anything else is an error in words.
func ParseVersion(raw string) (int64, error) {
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return 0, fmt.Errorf("dedupe: version %q is neither a base-10 integer nor an RFC 3339 time", raw)
	}
	if t.Before(minVersionTime) || t.After(maxVersionTime) {
		return 0, fmt.Errorf("dedupe: version time %q is outside the years 1678-2262", raw)
	}
	return t.UnixNano(), nil
}
