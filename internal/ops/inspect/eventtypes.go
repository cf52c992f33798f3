package inspect

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	tenantpkg "github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/models"
)

// Bounds of the event catalog's read.
const (
	// publishedWindow is how many of a tenant's newest deliveries the
	// catalog reads for the pairs it publishes.
	publishedWindow = 10000
	// maxPublishedTypes is how many pairs it returns at most.
	maxPublishedTypes = 500
)

// PublishedEventTypes are the doctype × event pairs tenant has published:
// those its events' fan-outs recorded (event_types, tenant.Published: every
// event since migration 0030, whether or not a webhook matched it; a range
// of its primary key), and, for what was published before that, those its
// newest publishedWindow deliveries record (an index range of
// deliveries_tenant_created (tenant, created_at DESC, id DESC), grouped),
// each once, at most maxPublishedTypes.
func PublishedEventTypes(ctx context.Context, db *gorm.DB, tenant string) ([]tenantpkg.EventType, error) {
	var recorded []models.PublishedType
	if err := db.WithContext(ctx).Where("tenant = ?", models.TenantOr(tenant)).
		Order("doc_type, event").Limit(maxPublishedTypes).Find(&recorded).Error; err != nil {
		return nil, fmt.Errorf("read the event types tenant %q published: %w", tenant, err)
	}
	var rows []struct{ DocType, DocEvent string }
	if err := db.WithContext(ctx).Raw(`SELECT doc_type, doc_event FROM (
		SELECT doc_type, doc_event FROM deliveries WHERE tenant = ? ORDER BY created_at DESC, id DESC LIMIT ?
	) recent GROUP BY doc_type, doc_event ORDER BY doc_type, doc_event LIMIT ?`,
		models.TenantOr(tenant), publishedWindow, maxPublishedTypes).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the event types of tenant %q: %w", tenant, err)
	}
	out := make([]tenantpkg.EventType, 0, len(recorded)+len(rows))
	for _, r := range recorded {
		out = append(out, tenantpkg.EventType{DocType: r.DocType, Event: r.Event})
	}
	for _, r := range rows {
		out = append(out, tenantpkg.EventType{DocType: r.DocType, Event: r.DocEvent})
	}
	out = sortedPairs(out)
	return out[:min(len(out), maxPublishedTypes)], nil
}

// sortedPairs sorts pairs by doctype then event, each once.
func sortedPairs(pairs []tenantpkg.EventType) []tenantpkg.EventType {
	slices.SortFunc(pairs, func(a, b tenantpkg.EventType) int {
		if c := strings.Compare(a.DocType, b.DocType); c != 0 {
			return c
		}
		return strings.Compare(a.Event, b.Event)
	})
	return slices.Compact(pairs)
}

// EventCatalog is what a tenant's webhook may subscribe to in its portal:
// the pairs it published (PublishedEventTypes), those its operator declared
// (declared, "Doctype:event"), and those its webhooks listen to now (so an
// edit keeps its choice), each once, by doctype then event.
func EventCatalog(ctx context.Context, db *gorm.DB, tenant string, declared []string) ([]tenantpkg.EventType, error) {
	out, err := PublishedEventTypes(ctx, db, tenant)
	if err != nil {
		return nil, err
	}
	for _, s := range declared {
		if et, err := tenantpkg.ParseEventType(s); err == nil {
			out = append(out, et)
		}
	}
	var hooks []struct{ DocType, DocEvent string }
	// Served by webhooks_tenant_name (tenant, name): bounded by the
	// tenant's webhooks.
	if err := db.WithContext(ctx).Model(&models.Webhook{}).Select("doc_type, doc_event").
		Where("tenant = ?", models.TenantOr(tenant)).Scan(&hooks).Error; err != nil {
		return nil, fmt.Errorf("read the event types of tenant %q's webhooks: %w", tenant, err)
	}
	for _, h := range hooks {
		out = append(out, tenantpkg.EventType{DocType: h.DocType, Event: h.DocEvent})
	}
	return sortedPairs(out), nil
}
