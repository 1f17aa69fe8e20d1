package verify

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Sign returns the headers a provider would send for body under scheme c:
// the signature header, the timestamp header if any and the id header if
// any. secret is written in c.SecretEncoding. ts is ignored when the scheme
// has no timestamp. It serves the CLI signer, tests and load generators.
func Sign(c Config, secret string, id string, ts time.Time, body []byte) (http.Header, error) {
	v, err := New(c, []string{secret})
	if err != nil {
		return nil, err
	}
	c = v.config
	if v.template.usesID && id == "" {
		return nil, errors.New("an event id is needed: the signed template uses {id}")
	}

	header := http.Header{}
	var timestamp string
	if c.hasTimestamp() {
		if ts.Before(time.Unix(0, 0)) {
			return nil, errors.New("the timestamp must not be before 1970: receivers read it as an unsigned unix time")
		}
		timestamp = formatTimestamp(ts, c.TimestampUnit)
		if c.TimestampHeader != "" {
			header.Set(c.TimestampHeader, timestamp)
		}
	}
	if c.IDHeader != "" && id != "" {
		header.Set(c.IDHeader, id)
	}

	var encoded string
	v.keys[0].compute(&v.template, id, timestamp, body, func(mac []byte) {
		if c.Encoding == EncodingBase64 {
			encoded = base64.StdEncoding.EncodeToString(mac)
		} else {
			encoded = hex.EncodeToString(mac)
		}
	})
	switch c.Format {
	case FormatStripe:
		header.Set(c.SignatureHeader, "t="+timestamp+",v1="+encoded)
	case FormatStandard:
		header.Set(c.SignatureHeader, "v1,"+encoded)
	default:
		header.Set(c.SignatureHeader, c.Prefix+encoded)
	}
	return header, nil
}

func formatTimestamp(ts time.Time, unit string) string {
	if unit == UnitMilliseconds {
		return strconv.FormatInt(ts.UnixMilli(), 10)
	}
	return strconv.FormatInt(ts.Unix(), 10)
}
