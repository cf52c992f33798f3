package inspect

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/engine/dispatch/storage"
	"github.com/homingdev/homing/models"
)

// Holds says what holds back a tenant's due Failed deliveries
// (Standing.Held), read once for a page of them.
type Holds struct {
	// Paused is set when the tenant is disabled.
	Paused bool
	// Failing are the names of the tenant's webhooks that are failing,
	// whose due retries wait behind one probe.
	Failing map[string]bool
	// Ordered are the IDs of the page's deliveries that wait for an
	// earlier one of their document (storage.HeldByOrder).
	Ordered map[string]bool
}

// Of is what holds d back: HeldTenant, HeldProbe or "".
func (h Holds) Of(d Delivery) string {
	switch {
	case d.Status != models.StatusFailed:
		return ""
	case h.Paused:
		return HeldTenant
	case h.Ordered[d.ID]:
		return HeldOrder
	case h.Failing[d.Webhook]:
		return HeldProbe
	}
	return ""
}

// ReadHolds reads tenant's Holds of the page of deliveries ds: its row by
// tenants' primary key, its failing webhooks from webhook_health (a row
// per webhook, by its primary key) joined to webhooks_tenant_name, bounded
// by the tenant's webhooks, and which of ds's Failed rows the ordering rule
// holds (storage.HeldByOrder). For every tenant's page (AllTenants), only
// the last.
func ReadHolds(ctx context.Context, db *gorm.DB, tenant string, ds []Delivery) (Holds, error) {
	h := Holds{Failing: map[string]bool{}}
	var failed []string
	for _, d := range ds {
		if d.Status == models.StatusFailed {
			failed = append(failed, d.ID)
		}
	}
	var err error
	if h.Ordered, err = storage.HeldByOrder(ctx, db, failed); err != nil {
		return h, err
	}
	if tenant == AllTenants {
		return h, nil
	}
	var enabled []bool
	if err := db.WithContext(ctx).Model(&models.Tenant{}).Where("name = ?", tenant).Pluck("enabled", &enabled).Error; err != nil {
		return h, fmt.Errorf("read tenant %q: %w", tenant, err)
	}
	h.Paused = len(enabled) == 1 && !enabled[0]
	var names []string
	if err := db.WithContext(ctx).Table("webhooks w").Joins("JOIN webhook_health h ON h.webhook_id = w.id").
		Where("w.tenant = ? AND h.failures >= ?", tenant, models.FailingAfter).Pluck("w.name", &names).Error; err != nil {
		return h, fmt.Errorf("read the failing webhooks of tenant %q: %w", tenant, err)
	}
	for _, n := range names {
		h.Failing[n] = true
	}
	return h, nil
}
