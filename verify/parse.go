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
// without allocating; the strings alias the header values.
type signatureList struct {
	encoded [maxSignatures]string
	count   int
}

func (l *signatureList) add(encoded string) error {
	if l.count == len(l.encoded) {
		return errTooManySignatures
	}
	l.encoded[l.count] = encoded
	l.count++
	return nil
}

func (l *signatureList) all() []string { return l.encoded[:l.count] }

// parseStripe reads one "t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]" header
// line, adds every v1 value to signatures and returns the t= value ("" if
// absent). Other keys are ignored; an item without "=" or two different t=
// values make the line malformed.
func parseStripe(line string, signatures *signatureList) (timestamp string, err error) {
	for rest := line; rest != ""; {
		var item string
		item, rest, _ = strings.Cut(rest, ",")
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, found := strings.Cut(item, "=")
		if !found {
			return "", fmt.Errorf("item %q is not key=value", truncate(item))
		}
		switch key {
		case "t":
			if timestamp != "" && timestamp != value {
				return "", errors.New("it carries two different t= values")
			}
			timestamp = value
		case "v1":
			if err := signatures.add(value); err != nil {
				return "", err
			}
		}
	}
	return timestamp, nil
}

// parseStandard reads one space-separated "v1,<base64> v1,<base64>" list and
// adds every v1 signature to signatures. Entries of other versions, such as
// "v1a,...", and entries without a comma are ignored.
func parseStandard(list string, signatures *signatureList) error {
	for rest := list; rest != ""; {
		var entry string
		entry, rest = nextField(rest)
		version, signature, found := strings.Cut(entry, ",")
		if !found || version != "v1" {
			continue
		}
		if err := signatures.add(signature); err != nil {
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

// parseTimestamp reads a unix timestamp in unit "s" or "ms". Only plain
// decimal digits are accepted: no sign, space, exponent or fraction.
func parseTimestamp(raw, unit string) (time.Time, error) {
	if raw == "" {
		return time.Time{}, errors.New("it is empty")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return time.Time{}, fmt.Errorf("%q is not a whole number of %s", truncate(raw), unitName(unit))
		}
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
