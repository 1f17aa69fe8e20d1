package verify

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// decodeSecret turns a configured secret into HMAC key bytes. position is
// the 1-based index used in errors; errors never include the secret itself.
func decodeSecret(secret, encoding string, position int) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("secret #%d is empty", position)
	}
	switch encoding {
	case SecretRaw:
		return []byte(secret), nil
	case SecretBase64:
		return decodeBase64Secret(secret, position, "")
	case SecretWhsec:
		return decodeBase64Secret(strings.TrimPrefix(secret, "whsec_"), position, " after the whsec_ prefix")
	default:
		return nil, fmt.Errorf("unknown secret encoding %q", encoding)
	}
}

func decodeBase64Secret(encoded string, position int, where string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("secret #%d is not valid standard base64%s", position, where)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("secret #%d decodes to an empty key", position)
	}
	return key, nil
}
