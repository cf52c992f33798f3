package dispatch

import (
	"context"
	"fmt"
	"net/http"

	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/webhook"
)

// loadHeaders reads the webhook's headers when the claim did not: the
// joined claims read them (claimColumns), so this reads only on the load →
// claim path. request needs them for the sealed credential
// headers, which each attempt takes from the webhook as it is now. Served by
// the webhooks primary key.
func (d *Dispatcher) loadHeaders(ctx context.Context, hook *models.Webhook) error {
	if hook.Headers != nil {
		return nil
	}
	var headers models.StringMap
	if err := d.db.WithContext(ctx).Raw("SELECT headers FROM webhooks WHERE id = ?", hook.ID).Row().Scan(&headers); err != nil {
		return fmt.Errorf("load headers of webhook %q: %w", hook.Name, err)
	}
	if headers == nil {
		headers = models.StringMap{}
	}
	hook.Headers = headers
	return nil
}

// maskSealed masks, in headers sent, the ones hook keeps sealed, so that the
// attempt history never holds a credential.
func maskSealed(sent models.StringMap, hook *models.Webhook) models.StringMap {
	for k, v := range hook.Headers {
		if _, sealed := webhook.SealedHeader(v); sealed {
			if got := http.CanonicalHeaderKey(k); sent[got] != "" {
				sent[got] = delivery.Masked
			}
		}
	}
	return sent
}
