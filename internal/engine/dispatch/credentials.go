package dispatch

import (
	"net/http"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/models"
)

// maskSealed masks, in headers sent, the ones hook keeps sealed, so that the
// attempt history never holds a credential.
func maskSealed(sent models.StringMap, hook *models.Webhook) models.StringMap {
	for k, v := range hook.Headers {
		if _, sealed := webhook.SealedHeader(v); sealed {
			if got := http.CanonicalHeaderKey(k); sent[got] != "" {
				sent[got] = send.Masked
			}
		}
	}
	return sent
}
