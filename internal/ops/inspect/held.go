package inspect

import (
	"context"
	"fmt"

	"gorm.io/gorm"

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
}

// Of is what holds d back: HeldTenant, HeldProbe or "".
func (h Holds) Of(d Delivery) string {
	switch {
	case d.Status != models.StatusFailed:
		return ""
	case h.Paused:
		return HeldTenant
	case h.Failing[d.Webhook]:
		return HeldProbe
	}
	return ""
}

// ReadHolds reads tenant's Holds: its row by tenants' primary key, and its
// failing webhooks from webhook_health (a row per webhook, by its primary
// key) joined to webhooks_tenant_name: bounded by the tenant's webhooks.
func ReadHolds(ctx context.Context, db *gorm.DB, tenant string) (Holds, error) {
	h := Holds{Failing: map[string]bool{}}
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
