package verify

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxSignatures bounds how many signatures one request may offer.
const maxSignatures = 16

var errTooManySignatures = fmt.Errorf("more than %d signatures", maxSignatures)

// signatureList collects the still-encoded signatures found in a header
// without allocating; the strings alias the header values. asymmetric marks
// the standard format's "v1a" (Ed25519) entries.
type signatureList struct {
	encoded    [maxSignatures]string
	asymmetric [maxSignatures]bool
	count      int
}

func (l *signatureList) add(encoded string, asymmetric bool) error {
	if l.count == len(l.encoded) {
		return errTooManySignatures
	}
	l.encoded[l.count], l.asymmetric[l.count] = encoded, asymmetric
	l.count++
	return nil
}

// keyedList names the items of a "t=<ts>,v1=<sig>" style header.
type keyedList struct {
	separator    string // between items: "," (stripe) or ";" (paddle)
	timestampKey string // "t" or "ts"
	signatureKey string // "v1", "h1", "v0", ...
}

// parseKeyed reads one header line of keyed items, adds every signature
// item to signatures and returns the timestamp item ("" if absent). Other
// keys are ignored; an item without "=" or two different timestamps make
// the line malformed.
func parseKeyed(line string, list keyedList, signatures *signatureList) (timestamp string, err error) {
	for rest := line; rest != ""; {
		var item string
		item, rest, _ = strings.Cut(rest, list.separator)
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, found := strings.Cut(item, "=")
		if !found {
			return "", fmt.Errorf("item %q is not key=value", truncate(item))
		}
		switch key {
		case list.timestampKey:
			if timestamp != "" && timestamp != value {
				return "", fmt.Errorf("it carries two different %s= values", list.timestampKey)
			}
			timestamp = value
		case list.signatureKey:
			if err := signatures.add(value, false); err != nil {
				return "", err
			}
		}
	}
	return timestamp, nil
}

// parseStandard reads one space-separated "v1,<base64> v1a,<base64>" list
// and adds the entries of the versions wanted. Entries of other versions
// and entries without a comma are ignored.
func parseStandard(list string, wantHMAC, wantEd25519 bool, signatures *signatureList) error {
	for rest := list; rest != ""; {
		var entry string
		entry, rest = nextField(rest)
		version, signature, found := strings.Cut(entry, ",")
		if !found || !(version == "v1" && wantHMAC || version == "v1a" && wantEd25519) {
			continue
		}
		if err := signatures.add(signature, version == "v1a"); err != nil {
			return err
		}
	}
	return nil
}

// nextField returns the first space-separated field of s and what follows it.
func nextField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " \t")
	end := strings.IndexAny(s, " \t")
	if end < 0 {
		return s, ""
	}
	return s[:end], s[end:]
}

// parseSingle strips the surrounding whitespace and prefix from one header
// line; ok is false when the prefix is absent.
func parseSingle(line, prefix string) (encoded string, ok bool) {
	return strings.CutPrefix(strings.TrimSpace(line), prefix)
}

// parseTimestamp reads a timestamp in unit "s" or "ms", where only plain
// decimal digits without a leading zero are accepted (no sign, space,
// exponent or fraction), or "rfc3339".
func parseTimestamp(raw, unit string) (time.Time, error) {
	if raw == "" {
		return time.Time{}, errors.New("it is empty")
	}
	if unit == UnitRFC3339 {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", truncate(raw))
		}
		return t, nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return time.Time{}, fmt.Errorf("%q is not a whole number of %s", truncate(raw), unitName(unit))
		}
	}
	if raw[0] == '0' && len(raw) > 1 {
		// No provider writes one, and where the signed fields have no separator (HubSpot's
		// {url}{body}{timestamp}) a leading zero would let a byte move between fields.
		return time.Time{}, fmt.Errorf("%q has a leading zero", truncate(raw))
	}
	value, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is out of range", truncate(raw))
	}
	if unit == UnitMilliseconds {
		return time.UnixMilli(value), nil
	}
	return time.Unix(value, 0), nil
}

func unitName(unit string) string {
	if unit == UnitMilliseconds {
		return "milliseconds"
	}
	return "seconds"
}

// truncate shortens attacker-supplied text quoted in error messages.
func truncate(s string) string {
	const limit = 40
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
