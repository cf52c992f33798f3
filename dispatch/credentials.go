package dispatch

import (
	"net/http"

	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/webhook"
)

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
