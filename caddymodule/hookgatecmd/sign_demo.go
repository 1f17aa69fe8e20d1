package hookgatecmd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/hookgate/hookgate/internal/jsonpath"
	"github.com/hookgate/hookgate/verify"
)

// demoEvents are bodies shaped like their provider's, for the presets whose event ID is not the
// body's "id" or "event_id": each has the ID (%[1]s, a JSON string) where its preset looks for it.
// %[2]d is the time in milliseconds.
var demoEvents = map[string]string{
	"hubspot":    `[{"eventId":%[1]s,"subscriptionType":"contact.creation","objectId":1,"occurredAt":%[2]d,"attemptNumber":0}]`,
	"sendgrid":   `[{"sg_event_id":%[1]s,"event":"processed","email":"demo@example.com","timestamp":%[2]d}]`,
	"line":       `{"destination":"Uhookgatedemo","events":[{"type":"message","webhookEventId":%[1]s,"timestamp":%[2]d,"deliveryContext":{"isRedelivery":false}}]}`,
	"gocardless": `{"events":[{"id":%[1]s,"resource_type":"payments","action":"created","created_at_ms":%[2]d}],"meta":{"webhook_id":%[1]s}}`,
	// Linear's body carries the signed time the gateway checks (caddymodule/message.go).
	"linear": `{"action":"create","type":"Issue","data":{"id":%[1]s},"webhookTimestamp":%[2]d}`,
	// type 2 is an application command: type 1 would be the PING the gateway answers itself.
	"discord": `{"id":%[1]s,"type":2,"token":"demo","data":{"name":"hookgate"},"sent_ms":%[2]d}`,
}

// demoHeaders are headers a provider sends that its own library insists on, though they are not
// signed: the signer adds them so the printed request is one that library would accept too.
var demoHeaders = map[string]map[string]string{
	"box":    {"Box-Signature-Version": "1", "Box-Signature-Algorithm": "HmacSHA256"},
	"twitch": {"Twitch-Eventsub-Message-Type": "notification"},
	"shopify": {"X-Shopify-Topic": "orders/create", "X-Shopify-Shop-Domain": "hookgate-demo.myshopify.com",
		"X-Shopify-Api-Version": "2025-01"},
}

// demoBody is a small event carrying its ID where the preset looks for it, and an entity with a
// version so `version json data.object.id json data.object.updated` can be tried too; for a
// scheme with a timestamp in the body (timestamp_json, a top-level key), the time now there. As
// a form (--form) it is the flat fields id, event_id and type.
func demoBody(cfg verify.Config, form bool, id string, now time.Time) (string, error) {
	if form {
		return url.Values{"id": {id}, "event_id": {id}, "type": {"hookgate.demo"}}.Encode(), nil
	}
	quoted, _ := json.Marshal(id)
	if shape, ok := demoEvents[cfg.Scheme]; ok {
		return fmt.Sprintf(shape, quoted, now.UnixMilli()), nil
	}
	var stamped string
	if cfg.TimestampJSON != "" {
		steps, err := jsonpath.Parse(cfg.TimestampJSON)
		if err != nil || len(steps) != 1 {
			return "", fmt.Errorf("--timestamp-json %s: the demo body carries a top-level key only; give the body with --body", cfg.TimestampJSON)
		}
		key, _ := json.Marshal(steps[0])
		value, _ := json.Marshal(demoTimestamp(now, cfg.TimestampUnit))
		stamped = fmt.Sprintf(`,%s:%s`, key, value)
	}
	return fmt.Sprintf(`{"id":%s,"event_id":%s,"type":"hookgate.demo","data":{"object":{"id":"obj_demo","updated":%d}}%s}`,
		quoted, quoted, now.UnixNano(), stamped), nil
}

// demoTimestamp is now in unit, as a provider writes it in a JSON body.
func demoTimestamp(now time.Time, unit string) any {
	switch unit {
	case verify.UnitMilliseconds:
		return now.UnixMilli()
	case verify.UnitRFC3339:
		return now.UTC().Format(time.RFC3339)
	}
	return now.Unix()
}
