package tenant

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// Bounds of what Published keeps.
const (
	// MaxPublishedTypes is how many pairs one tenant's record holds: the
	// doctype is the producer's free text, so a producer that invents
	// doctypes stops adding pairs here (not events: they are delivered as
	// ever).
	MaxPublishedTypes = 1000
	// publishedSeen is how many pairs a process remembers having
	// recorded; past it, it forgets them all and records each again once
	// (an INSERT that changes nothing).
	publishedSeen = 10000
)

// Published records the doctype × event pairs each tenant publishes
// (event_types), which the portal's event list offers: the fan-out of every
// event calls Record, whether or not a webhook matches it. Each pair is
// written once per process: the first Record of a pair runs one INSERT …
// ON CONFLICT DO NOTHING, the others one map lookup. Safe for concurrent
// use.
type Published struct {
	db  *gorm.DB
	now func() time.Time

	mu   sync.Mutex
	seen map[publishedKey]struct{}
}

type publishedKey struct{ tenant, docType, event string }

// NewPublished records into db; now is the clock of first_seen.
func NewPublished(db *gorm.DB, now func() time.Time) *Published {
	return &Published{db: db, now: now, seen: make(map[publishedKey]struct{})}
}

// Record notes that tenant published an event of docType and event. A
// tenant that has MaxPublishedTypes pairs already, or no row, gets none;
// an error leaves the pair to be recorded by the next event.
func (p *Published) Record(ctx context.Context, tenant, docType, event string) error {
	k := publishedKey{models.TenantOr(tenant), docType, event}
	p.mu.Lock()
	_, known := p.seen[k]
	p.mu.Unlock()
	if known {
		return nil
	}
	// Served by event_types' primary key (tenant, …) and tenants'.
	err := p.db.WithContext(ctx).Exec(`INSERT INTO event_types (tenant, doc_type, event, first_seen)
		SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM tenants WHERE name = ?)
		AND (SELECT count(*) FROM (SELECT 1 FROM event_types WHERE tenant = ? LIMIT ?) n) < ?
		ON CONFLICT (tenant, doc_type, event) DO NOTHING`,
		k.tenant, k.docType, k.event, p.now().UTC(), k.tenant, k.tenant, MaxPublishedTypes, MaxPublishedTypes).Error
	if err != nil {
		return fmt.Errorf("record that tenant %q publishes %s:%s: %w", k.tenant, docType, event, err)
	}
	p.mu.Lock()
	if len(p.seen) >= publishedSeen {
		clear(p.seen)
	}
	p.seen[k] = struct{}{}
	p.mu.Unlock()
	return nil
}
