package verify

import (
	"errors"
	"fmt"
	"time"
)

// Resigner signs again, with a fresh timestamp, a request that already passed verification, so
// that a receiver enforcing the provider's freshness window accepts it after a delay (a gateway
// that queued it while the receiver was down).
type Resigner struct {
	config Config
	key    string
	// refreshes is false when the scheme signs no timestamp: nothing ages, nothing is changed.
	refreshes bool
}

// NewResigner returns the Resigner of scheme c with the HMAC secret key (in c.SecretEncoding).
// It refuses schemes it cannot re-sign: public-key ones (the provider's private key would be
// needed) and those that sign their timestamp inside the body (the body would change). Errors
// never include the key.
func NewResigner(c Config, key string) (*Resigner, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.publicKeyScheme() {
		return nil, fmt.Errorf("the %s scheme is signed with the provider's private key (%s), which only the provider has: it cannot be re-signed", c.Scheme, c.Algorithm)
	}
	if c.TimestampJSON != "" {
		return nil, fmt.Errorf("the %s scheme signs its timestamp inside the body (%s), which is forwarded unchanged: it cannot be re-signed with a fresh one", c.Scheme, c.TimestampJSON)
	}
	if !c.hasTimestamp() {
		return &Resigner{config: c}, nil
	}
	if key == "" {
		return nil, fmt.Errorf("the %s scheme is re-signed with the first HMAC secret and none is set: signatures checked with public keys alone could be re-signed only with the provider's private key", c.Scheme)
	}
	if c.BodyHashParam != "" {
		return nil, fmt.Errorf("the %s scheme signs the body's hash in the URL (%s): it cannot be re-signed", c.Scheme, c.BodyHashParam)
	}
	if _, err := decodeSecret(key, c.SecretEncoding, 1); err != nil {
		return nil, err
	}
	return &Resigner{config: c, key: key, refreshes: true}, nil
}

// Refreshes reports whether Resign changes anything: false when the scheme signs no timestamp,
// so the provider's signature never ages and is left as it is.
func (r *Resigner) Refreshes() bool { return r.refreshes }

// Resign replaces m's signature, timestamp header and (for a scheme that signs an id) id header
// with those the provider would send at ts, keeping the id m carries. A scheme with several
// signature headers (Box's primary and secondary) gets the first one; the others are removed,
// since their signatures no longer match the timestamp. m.Method and m.URL must be the ones
// the provider signed when the scheme signs them.
func (r *Resigner) Resign(m *Message, ts time.Time) error {
	if !r.refreshes {
		return nil
	}
	c := &r.config
	var id string
	if c.IDHeader != "" {
		id = m.Header.Get(c.IDHeader)
	}
	if c.SignsURL() && m.URL == "" {
		return errors.New("the URL the provider signed is unknown")
	}
	for _, other := range c.signatureHeaders()[1:] {
		m.Header.Del(other)
	}
	return SignMessage(*c, r.key, id, ts, m)
}
