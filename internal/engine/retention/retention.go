// Package retention deletes old final deliveries (and their attempt
// history), and expired portal links, in small batches, so it never holds a
// long lock on a table. It never touches Failed rows: those still have an
// attempt scheduled.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/models"
)

// Defaults for how long final deliveries are kept.
const (
	DefaultDelivered = 30 * 24 * time.Hour
	DefaultExhausted = 90 * 24 * time.Hour
	// BatchSize rows are deleted per statement.
	BatchSize = 500
	// maxBatches bounds one run; the next run continues.
	maxBatches = 200
	// DefaultPause is retention.pause: the wait after each batch. Deleting
	// unpaced (about 50,000 rows/s at 10,000,000 rows) took first-attempt
	// p99 from 18 ms to 250–1,500 ms while it ran; paced, a run of 100,000
	// rows lasts about 12 s (docs/performance.md, "Growth").
	DefaultPause = 50 * time.Millisecond
)

// Config says how long each final status is kept.
type Config struct {
	Delivered time.Duration
	Exhausted time.Duration
	BatchSize int
	// Pause is waited after every full batch of deliveries, so that a run
	// never holds the database's writes for long; 0 is DefaultPause and a
	// negative Pause none.
	Pause time.Duration
	// Wait waits d or until ctx ends (nil: a timer); tests record it.
	Wait   func(ctx context.Context, d time.Duration) error
	Clock  clock.Clock
	Logger *slog.Logger
}

// Retention deletes expired deliveries.
type Retention struct {
	db  *gorm.DB
	cfg Config
}

// New builds a Retention.
func New(db *gorm.DB, cfg Config) *Retention {
	if cfg.Delivered <= 0 {
		cfg.Delivered = DefaultDelivered
	}
	if cfg.Exhausted <= 0 {
		cfg.Exhausted = DefaultExhausted
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = BatchSize
	}
	if cfg.Pause == 0 {
		cfg.Pause = DefaultPause
	}
	if cfg.Wait == nil {
		cfg.Wait = wait
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Retention{db: db, cfg: cfg}
}

// Result counts what one run deleted.
type Result struct {
	Delivered int64
	Exhausted int64
	// EventKeys counts the outbox's idempotency records (published_events)
	// deleted: they are kept as long as the longer of the two retentions,
	// so a key outlives the deliveries it protects.
	EventKeys int64
	// PortalLinks counts the expired portal links deleted.
	PortalLinks int64
}

// RunOnce deletes Delivered rows created before now − retention.delivered,
// Exhausted rows created before now − retention.exhausted, and portal links
// past their expiry.
func (r *Retention) RunOnce(ctx context.Context) (Result, error) {
	now := r.cfg.Clock.Now().UTC()
	var res Result
	var err error
	if res.Delivered, err = r.purge(ctx, models.StatusDelivered, now.Add(-r.cfg.Delivered)); err != nil {
		return res, err
	}
	if res.Exhausted, err = r.purge(ctx, models.StatusExhausted, now.Add(-r.cfg.Exhausted)); err != nil {
		return res, err
	}
	if res.EventKeys, err = r.purgeEventKeys(ctx, now.Add(-max(r.cfg.Delivered, r.cfg.Exhausted))); err != nil {
		return res, err
	}
	if res.PortalLinks, err = r.purgePortalLinks(ctx, now); err != nil {
		return res, err
	}
	if res.Delivered+res.Exhausted+res.EventKeys+res.PortalLinks > 0 {
		r.cfg.Logger.Info("retention", "delivered_deleted", res.Delivered, "exhausted_deleted", res.Exhausted, "event_keys_deleted", res.EventKeys,
			"portal_links_deleted", res.PortalLinks)
	}
	return res, nil
}

// purgeEventKeys deletes published_events recorded before before, in
// batches like purge.
func (r *Retention) purgeEventKeys(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for i := 0; i < maxBatches; i++ {
		var keys []models.PublishedEvent
		// Served by published_events_created (created_at).
		if err := r.db.WithContext(ctx).Model(&models.PublishedEvent{}).Select("tenant", "event_id").
			Where("created_at < ?", before).Order("created_at").Limit(r.cfg.BatchSize).
			Find(&keys).Error; err != nil {
			return total, fmt.Errorf("select expired event keys: %w", err)
		}
		if len(keys) == 0 {
			return total, nil
		}
		// An event ID is unique per tenant: another tenant's key of the
		// same ID, maybe recorded later, stays. Served by the primary key.
		ids := make([][]any, len(keys))
		for i, k := range keys {
			ids[i] = []any{k.Tenant, k.EventID}
		}
		res := r.db.WithContext(ctx).Where("(tenant, event_id) IN ?", ids).Delete(&models.PublishedEvent{})
		if res.Error != nil {
			return total, fmt.Errorf("delete expired event keys: %w", res.Error)
		}
		total += res.RowsAffected
		if len(ids) < r.cfg.BatchSize {
			return total, nil
		}
	}
	return total, nil
}

// purge deletes status rows created before before, oldest first, a batch
// at a time. Each batch's SELECT continues from the creation time the
// previous batch ended at instead of the start of the range: the rows a
// pass has deleted stay in deliveries_status_created_tenant as dead entries until
// VACUUM, and walking past all of them again for every batch made a pass
// quadratic (at 10,000,000 rows, a pass of 100,000 took 2 s on a vacuumed
// table and 20 s once 800,000 deleted rows were waiting for VACUUM;
// docs/performance.md, "Growth").
func (r *Retention) purge(ctx context.Context, status string, before time.Time) (int64, error) {
	var total int64
	var from *time.Time
	for i := 0; i < maxBatches; i++ {
		var batch []struct {
			ID        string
			CreatedAt time.Time
		}
		// Served by deliveries_status_created_tenant (status, created_at).
		q := r.db.WithContext(ctx).Model(&models.Delivery{}).Select("id", "created_at").
			Where("status = ? AND created_at < ?", status, before)
		if from != nil {
			// At or after: rows sharing the last one's time may be left.
			q = q.Where("created_at >= ?", *from)
		}
		if err := q.Order("created_at").Limit(r.cfg.BatchSize).Scan(&batch).Error; err != nil {
			return total, fmt.Errorf("select expired %s deliveries: %w", status, err)
		}
		if len(batch) == 0 {
			return total, nil
		}
		ids := make([]string, len(batch))
		for i, b := range batch {
			ids[i] = b.ID
		}
		last := batch[len(batch)-1].CreatedAt
		from = &last
		// The status condition again: a row requeued since the select stays.
		// Attempt history goes with its delivery (ON DELETE CASCADE).
		res := r.db.WithContext(ctx).Where("id IN ? AND status = ?", ids, status).Delete(&models.Delivery{})
		if res.Error != nil {
			return total, fmt.Errorf("delete expired %s deliveries: %w", status, res.Error)
		}
		total += res.RowsAffected
		if len(ids) < r.cfg.BatchSize {
			return total, nil
		}
		if err := r.pause(ctx); err != nil {
			return total, err
		}
	}
	return total, nil
}

// purgePortalLinks deletes the portal links that expired before now, oldest
// first, a batch at a time with a pause after each full one, as purge does.
// An expired link opens nothing whether or not its row exists (its token
// carries its expiry), so its row is kept no longer; a live link's row,
// revoked or not, stays: it is what refuses a revoked link.
func (r *Retention) purgePortalLinks(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for i := 0; i < maxBatches; i++ {
		var ids []string
		// Served by portal_links_expires (expires_at).
		if err := r.db.WithContext(ctx).Model(&models.PortalLink{}).Where("expires_at < ?", now).
			Order("expires_at").Limit(r.cfg.BatchSize).Pluck("id", &ids).Error; err != nil {
			return total, fmt.Errorf("select expired portal links: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		res := r.db.WithContext(ctx).Where("id IN ? AND expires_at < ?", ids, now).Delete(&models.PortalLink{})
		if res.Error != nil {
			return total, fmt.Errorf("delete expired portal links: %w", res.Error)
		}
		total += res.RowsAffected
		if len(ids) < r.cfg.BatchSize {
			return total, nil
		}
		if err := r.pause(ctx); err != nil {
			return total, err
		}
	}
	return total, nil
}

// pause waits retention.pause after a full batch.
func (r *Retention) pause(ctx context.Context) error {
	if r.cfg.Pause <= 0 {
		return nil
	}
	if err := r.cfg.Wait(ctx, r.cfg.Pause); err != nil {
		return fmt.Errorf("pause between retention batches: %w", err)
	}
	return nil
}

// wait is Config.Wait's default: a timer that ctx can cut short.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
