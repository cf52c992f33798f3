package inspect

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// FilterChoices are what a deliveries filter offers to pick from instead of
// typing: the tenant's webhooks by name, and the doctypes its deliveries
// may have.
type FilterChoices struct {
	Webhooks []string
	DocTypes []string
}

// ReadFilterChoices reads tenant's FilterChoices in two bounded, indexed
// statements: its webhooks' names and doctypes by webhooks_tenant_name
// (tenant, name), bounded by the tenant's webhooks; and the doctypes it
// published, the event catalog's read (PublishedEventTypes: its newest
// publishedWindow deliveries by deliveries_tenant_created), which keeps the
// doctype of a webhook since deleted or changed. Both lists are sorted,
// each name once.
func ReadFilterChoices(ctx context.Context, db *gorm.DB, tenant string) (FilterChoices, error) {
	var hooks []struct{ Name, DocType string }
	if err := db.WithContext(ctx).Model(&models.Webhook{}).Select("name, doc_type").
		Where("tenant = ?", models.TenantOr(tenant)).Order("name").Scan(&hooks).Error; err != nil {
		return FilterChoices{}, fmt.Errorf("read the webhooks of tenant %q: %w", tenant, err)
	}
	published, err := PublishedEventTypes(ctx, db, tenant)
	if err != nil {
		return FilterChoices{}, err
	}
	var c FilterChoices
	for _, h := range hooks {
		c.Webhooks = append(c.Webhooks, h.Name)
		c.DocTypes = append(c.DocTypes, h.DocType)
	}
	for _, et := range published {
		c.DocTypes = append(c.DocTypes, et.DocType)
	}
	slices.Sort(c.DocTypes)
	c.DocTypes = slices.Compact(c.DocTypes)
	return c, nil
}
