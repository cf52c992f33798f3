package inspect

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/models"
)

// LatencySample is how many of a webhook's newest deliveries WebhookLatency
// reads: a page view costs at most this many rows, however busy the
// webhook.
const LatencySample = 10000

// Latency is the latency users feel of one webhook's deliveries made in a
// window: from each event's acceptance to its delivery's final outcome
// (Delivered or Exhausted), and to its first attempt. A quantile is nil
// when no delivery has it.
type Latency struct {
	// Final counts the deliveries with a final outcome, First those with a
	// first attempt; Sampled says the window held more deliveries than
	// LatencySample and only the newest were read.
	Final, First       int
	Sampled            bool
	FinalP50, FinalP99 *time.Duration
	FirstP50, FirstP99 *time.Duration
}

// WebhookLatency reads tenant's webhook name's Latency over the deliveries
// created in the window before now (at most the newest LatencySample):
// served by deliveries_webhook_created (webhook_name, created_at DESC), and
// each first attempt by delivery_attempts' primary key. Quantiles are the
// nearest rank. A delivery of a task that did not carry its acceptance
// counts from its created_at (the fan-out), the nearest.
func WebhookLatency(ctx context.Context, db *gorm.DB, tenant, name string, now time.Time, window time.Duration) (Latency, error) {
	var rows []struct {
		Status     string
		AcceptedAt *time.Time
		CreatedAt  time.Time
		UpdatedAt  time.Time
		FirstAt    *time.Time
	}
	err := db.WithContext(ctx).Table("deliveries d").
		Select("d.status, d.accepted_at, d.created_at, d.updated_at, (SELECT a.at FROM delivery_attempts a WHERE a.delivery_id = d.id AND a.attempt = 1) AS first_at").
		Where("d.webhook_name = ? AND d.tenant = ? AND d.created_at >= ?", name, models.TenantOr(tenant), now.Add(-window)).
		Order("d.created_at DESC").Limit(LatencySample + 1).Scan(&rows).Error
	if err != nil {
		return Latency{}, fmt.Errorf("latency of webhook %q: %w", name, err)
	}
	var l Latency
	if len(rows) > LatencySample {
		rows, l.Sampled = rows[:LatencySample], true
	}
	var final, first []time.Duration
	for _, r := range rows {
		from := r.CreatedAt
		if r.AcceptedAt != nil {
			from = *r.AcceptedAt
		}
		if r.Status == models.StatusDelivered || r.Status == models.StatusExhausted {
			final = append(final, max(r.UpdatedAt.Sub(from), 0))
		}
		if r.FirstAt != nil {
			first = append(first, max(r.FirstAt.Sub(from), 0))
		}
	}
	l.Final, l.First = len(final), len(first)
	l.FinalP50, l.FinalP99 = quantile(final, 0.5), quantile(final, 0.99)
	l.FirstP50, l.FirstP99 = quantile(first, 0.5), quantile(first, 0.99)
	return l, nil
}

// quantile is the nearest-rank q-quantile of ds (sorted in place); nil when
// ds is empty.
func quantile(ds []time.Duration, q float64) *time.Duration {
	if len(ds) == 0 {
		return nil
	}
	slices.Sort(ds)
	rank := int(math.Ceil(q * float64(len(ds))))
	d := ds[min(max(rank, 1), len(ds))-1]
	return &d
}
