package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// verify checks the signature, then, for a scheme whose timestamp is a field of the signed body
// rather than a header (Linear's webhookTimestamp), that field's freshness: the body is signed,
// so the field is too, and a captured request replayed later is refused as stale. A body the
// field cannot be read from as the app would is a *jsonRefusal (jsonbody.go).
func (h *Handler) verify(msg *verify.Message, doc *jsonBody, now time.Time) (verify.Result, error) {
	defer h.timeVerify(now) // now is taken just before the call: the verification's start too
	verified, err := h.verifier.VerifyMessage(msg, now)
	if err != nil || h.timestampPath == nil {
		return verified, err
	}
	stamp, err := doc.get(h.timestampPath)
	if err != nil && !errors.Is(err, errNotJSON) { // not JSON: the timestamp is missing
		return verify.Result{}, err
	}
	if err := h.verifier.CheckTimestamp(stamp.String(), now); err != nil {
		return verify.Result{}, err
	}
	return verified, nil
}

// provisionBodyTimestamp splits the scheme's body timestamp path, if it has one.
func (h *Handler) provisionBodyTimestamp() error {
	h.timestampPath = nil
	if text := h.verifier.Config().TimestampJSON; text != "" {
		path, err := parseJSONPath(text)
		if err != nil {
			return fmt.Errorf("timestamp_json: %w", err)
		}
		h.timestampPath = &path
	}
	return nil
}

// verifyStatus is the status of a request verify refused: 401, or 400 for a signed body whose
// timestamp field cannot be read as the app would.
func verifyStatus(err error) int {
	var refused *jsonRefusal
	if errors.As(err, &refused) {
		return http.StatusBadRequest
	}
	return http.StatusUnauthorized
}
