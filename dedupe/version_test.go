package dedupe

import (
	"testing"
	"time"
)

func TestParseVersion(t *testing.T) {
	ok := []struct {
		raw  string
		want int64
	}{
		{"42", 42},
		{"-1", -1},
		{"2024-01-02T03:04:05Z", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()},
		{"2024-01-02T03:04:05.123456789+02:00", time.Date(2024, 1, 2, 1, 4, 5, 123456789, time.UTC).UnixNano()},
	}
	for _, tc := range ok {
		got, err := ParseVersion(tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d, nil", tc.raw, got, err, tc.want)
		}
	}
	for _, raw := range []string{"", "abc", "1.5", "2024-13-01", "2024-13-01T00:00:00Z", "3000-01-01T00:00:00Z"} {
		if got, err := ParseVersion(raw); err == nil {
			t.Errorf("ParseVersion(%q) = %d, nil; want an error", raw, got)
		}
	}
}

func TestParseVersionTimesOrder(t *testing.T) {
	earlier, err := ParseVersion("2024-01-02T03:04:05.999999999+01:00")
	if err != nil {
		t.Fatal(err)
	}
	later, err := ParseVersion("2024-01-02T02:04:06Z")
	if err != nil {
		t.Fatal(err)
	}
	if earlier >= later {
		t.Errorf("earlier time %d does not sort before later time %d", earlier, later)
	}
}
