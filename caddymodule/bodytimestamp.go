package caddymodule

import (
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/verify"
)

// verify checks the signature, then, for a scheme whose timestamp is a field of the signed body
// rather than a header (Linear's webhookTimestamp), that field's freshness: the body is signed,
// so the field is too, and a captured request replayed later is refused as stale.
func (h *Handler) verify(msg *verify.Message, now time.Time) (verify.Result, error) {
	defer h.timeVerify(now) // now is taken just before the call: the verification's start too
	verified, err := h.verifier.VerifyMessage(msg, now)
	if err != nil {
		return verified, err
	}
	if path := h.verifier.Config().TimestampJSON; path != "" {
		if err := h.verifier.CheckTimestamp(gjson.GetBytes(msg.Body, path).String(), now); err != nil {
			return verify.Result{}, err
		}
	}
	return verified, nil
}
