package verify

// ErrorKind classifies why a request failed verification.
type ErrorKind int

const (
	// MissingSignature means the signature header is absent or carries no usable signature.
	MissingSignature ErrorKind = iota + 1
	// MalformedSignature means the signature header could not be parsed or decoded.
	MalformedSignature
	// SignatureMismatch means no signature matched any configured secret.
	SignatureMismatch
	// MissingTimestamp means the scheme signs a timestamp but the request carries none.
	MissingTimestamp
	// MalformedTimestamp means the timestamp is not a plain non-negative integer.
	MalformedTimestamp
	// StaleTimestamp means the signed timestamp is older than the tolerance allows.
	StaleTimestamp
	// FutureTimestamp means the signed timestamp is further in the future than the tolerance allows.
	FutureTimestamp
	// MissingID means the scheme signs an event id but the request carries none.
	MissingID
	// UnsignedBody means the signature does not cover the body as sent (Twilio:
	// neither a form nor hashed into the signed URL).
	UnsignedBody
)

// String returns the kind's name, e.g. "signature mismatch".
func (k ErrorKind) String() string {
	switch k {
	case MissingSignature:
		return "missing signature"
	case MalformedSignature:
		return "malformed signature"
	case SignatureMismatch:
		return "signature mismatch"
	case MissingTimestamp:
		return "missing timestamp"
	case MalformedTimestamp:
		return "malformed timestamp"
	case StaleTimestamp:
		return "stale timestamp"
	case FutureTimestamp:
		return "future timestamp"
	case MissingID:
		return "missing id"
	case UnsignedBody:
		return "unsigned body"
	default:
		return "unknown verification error"
	}
}

// Error is a verification failure. Its message is a plain-words reason fit
// for an HTTP response body: it never contains a secret or an expected
// signature.
type Error struct {
	Kind   ErrorKind
	Reason string
}

// Error returns the reason in plain words.
func (e *Error) Error() string { return e.Reason }

func failure(kind ErrorKind, reason string) *Error {
	return &Error{Kind: kind, Reason: reason}
}
