// Package opsevent publishes Homing's own operational events: when a
// webhook starts failing, recovers or is disabled, and when one of its
// deliveries is exhausted, an event of doc_type DocType goes into the
// webhook's tenant through the outbox, like any producer's event. Subscribing
// is creating an ordinary webhook for that doctype and event.
//
// What can happen twice, and why it does not: every event is written into
// the outbox in the transaction that makes its state change (the
// delivery's update to Exhausted, the webhook's update to disabled, the
// webhook_health row's announced_since moved), and that change is fenced on
// the state before it, so that of two processes only one commits it. Its ID
// is derived from the change (the delivery's ID, the webhook's ID and the
// episode's failing_since), and the outbox refuses an ID it holds already.
// A crash before the commit loses the change and its event together; the
// sweep finds a health change that was not announced (Reconcile) and
// announces it.
//
// No loops: a webhook of doctype DocType (one that receives operational
// events) causes none of its own. Its failures show in the console and the
// metrics as any webhook's do.
package opsevent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/models"
)

// DocType is the doctype of every operational event.
const DocType = models.OpsDocType

// The operational events.
const (
	// Failing: the webhook's failures in a row reached
	// models.FailingAfter; its retries go out one probe at a time.
	Failing = "failing"
	// Recovered: the first success after Failing.
	Recovered = "recovered"
	// Disabled: the webhook was disabled by a 410 or by
	// health.disable_after.
	Disabled = "disabled"
	// Exhausted: one delivery became Exhausted.
	Exhausted = "exhausted"
)

// Events lists the operational events, for pickers and docs.
var Events = []string{Failing, Recovered, Disabled, Exhausted}

// Config is how operational events are published.
type Config struct {
	// CopyTo (ops_events.copy_to) is a tenant that receives a copy of
	// every other tenant's operational events, with the source tenant in
	// doc.source_tenant; "" sends none.
	CopyTo string
	// ConsoleURL (ops_events.console_url) is the console's public base URL
	// (https://homing.example.com), put in front of each event's link;
	// "" leaves the link a path (/console/webhooks/…).
	ConsoleURL string
}

// Publisher writes operational events into the outbox. The zero value
// publishes with no copy and path links; a nil *Publisher publishes
// nothing.
type Publisher struct {
	cfg Config
	log *slog.Logger
}

// New returns a Publisher with cfg, logging what it cannot publish to log.
func New(cfg Config, log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{cfg: cfg, log: log}
}

// Default is the Publisher a store uses when none is given.
var Default = New(Config{}, nil)

// hookInfo is what an event says of its webhook.
type hookInfo struct {
	ID, Tenant, Name, DocType, DisabledReason string
	Enabled                                   bool
}

func readHook(tx *gorm.DB, webhookID string) (hookInfo, bool, error) {
	var w models.Webhook
	err := tx.Select("id", "tenant", "name", "doc_type", "enabled", "disabled_reason").Where("id = ?", webhookID).Take(&w).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return hookInfo{}, false, nil
	}
	if err != nil {
		return hookInfo{}, false, fmt.Errorf("read webhook %s: %w", webhookID, err)
	}
	return hookInfo{ID: w.ID, Tenant: models.TenantOr(w.Tenant), Name: w.Name, DocType: w.DocType,
		DisabledReason: w.DisabledReason, Enabled: w.Enabled}, true, nil
}

// link is the console page of path (webhooks/NAME or deliveries/ID).
func (p *Publisher) link(path string) string {
	return p.cfg.ConsoleURL + "/console/" + path
}

func webhookPath(name string) string { return "webhooks/" + url.PathEscape(name) }

// publish writes the event name with doc into tenant through tx, and its
// copy into Config.CopyTo. A tenant that refuses events (disabled, or gone)
// gets none, and that is logged: its webhooks deliver nothing either.
func (p *Publisher) publish(ctx context.Context, tx *gorm.DB, tenant, id, name, docName string, doc map[string]any, now time.Time) error {
	doc["tenant"] = tenant
	ev := event.Event{Tenant: tenant, ID: id, DocType: DocType, DocName: docName, Event: name, Doc: doc}
	if err := p.add(ctx, tx, ev, now); err != nil {
		return err
	}
	if p.cfg.CopyTo == "" || p.cfg.CopyTo == tenant {
		return nil
	}
	cp := maps.Clone(doc)
	cp["source_tenant"] = tenant
	return p.add(ctx, tx, event.Event{Tenant: p.cfg.CopyTo, ID: tenant + "/" + id, DocType: DocType, DocName: docName, Event: name, Doc: cp}, now)
}

func (p *Publisher) add(ctx context.Context, tx *gorm.DB, ev event.Event, now time.Time) error {
	_, err := outbox.Add(ctx, tx, ev, now)
	if errors.Is(err, outbox.ErrTenant) {
		p.log.Warn("operational event not published: its tenant refuses events", "event", ev.Event, "id", ev.ID, "error", err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish operational event %s: %w", ev.ID, err)
	}
	return nil
}

func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Disabled publishes, in tx, that webhookID was disabled at now for
// reason, with exhausted of its pending deliveries made Exhausted by it.
// The caller calls it only in the transaction that disabled the webhook
// (an update fenced on enabled), so it happens once per disable.
func (p *Publisher) Disabled(ctx context.Context, tx *gorm.DB, webhookID, reason string, exhausted int64, now time.Time) error {
	if p == nil {
		return nil
	}
	h, ok, err := readHook(tx, webhookID)
	if err != nil || !ok || h.DocType == DocType {
		return err
	}
	health, err := readHealth(tx, webhookID)
	if err != nil {
		return err
	}
	doc := map[string]any{
		"name": h.Name, "webhook": h.Name, "state": models.HealthDisabled, "since": rfc3339(now),
		"failures": health.Failures, "last_error": reason, "reason": reason, "exhausted": exhausted,
		"link": p.link(webhookPath(h.Name)),
	}
	return p.publish(ctx, tx, h.Tenant, "homing:disabled:"+h.ID+":"+micros(now), Disabled, h.Name, doc, now)
}

// DeliveryExhausted publishes, in tx, that delivery id became Exhausted
// at now. The caller calls it only in the transaction whose fenced update
// made it so; its ID is the delivery's, so it happens once per delivery.
// A delivery of an operational event publishes nothing (no loops).
func (p *Publisher) DeliveryExhausted(ctx context.Context, tx *gorm.DB, id string, now time.Time) error {
	if p == nil {
		return nil
	}
	var d models.Delivery
	err := tx.Select("id", "tenant", "webhook_id", "webhook_name", "event_id", "doc_type", "doc_name", "doc_event", "attempts", "last_error").
		Where("id = ?", id).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read delivery %s: %w", id, err)
	}
	if d.DocType == DocType {
		return nil
	}
	h, ok, err := readHook(tx, d.WebhookID)
	if err != nil {
		return err
	}
	if ok && h.DocType == DocType {
		return nil
	}
	tenant := models.TenantOr(d.Tenant)
	state, failures := "deleted", 0
	if ok {
		health, err := readHealth(tx, d.WebhookID)
		if err != nil {
			return err
		}
		state, failures = stateOf(h, health), health.Failures
	}
	doc := map[string]any{
		"name": d.WebhookName, "webhook": d.WebhookName, "state": state, "since": rfc3339(now),
		"failures": failures, "last_error": d.LastError, "reason": d.LastError,
		"delivery_id": d.ID, "event_id": d.EventID, "doc_type": d.DocType, "doc_name": d.DocName, "event": d.DocEvent,
		"attempts": d.Attempts, "link": p.link("deliveries/" + url.PathEscape(d.ID)),
	}
	return p.publish(ctx, tx, tenant, "homing:exhausted:"+d.ID, Exhausted, d.WebhookName, doc, now)
}

// stateOf is the webhook's state in one word, as every view names it.
func stateOf(h hookInfo, health models.WebhookHealth) string { return health.StateOf(h.Enabled) }

func readHealth(tx *gorm.DB, webhookID string) (models.WebhookHealth, error) {
	var hs []models.WebhookHealth
	if err := tx.Where("webhook_id = ?", webhookID).Limit(1).Find(&hs).Error; err != nil {
		return models.WebhookHealth{}, fmt.Errorf("read health of webhook %s: %w", webhookID, err)
	}
	if len(hs) == 0 {
		return models.WebhookHealth{WebhookID: webhookID}, nil
	}
	return hs[0], nil
}

// unannounced is the condition on webhook_health h of a health change not
// yet announced: a failing episode whose `failing` event is not published,
// or an announced one that ended (its `recovered` event not published).
func unannounced(failingAfter int) string {
	return `((h.failures >= ` + strconv.Itoa(failingAfter) + ` AND h.failing_since IS NOT NULL AND (h.announced_since IS NULL OR h.announced_since <> h.failing_since))
	OR (h.announced_since IS NOT NULL AND (h.failing_since IS NULL OR h.failing_since <> h.announced_since)))`
}

// Announce publishes the health changes of webhookID that are not yet
// announced: `recovered` for an announced episode that ended, then
// `failing` for one that reached models.FailingAfter failures, each once.
// lastError is the error of the attempt that made the change, when the
// caller knows it. A webhook of doctype DocType announces nothing.
func (p *Publisher) Announce(ctx context.Context, db *gorm.DB, webhookID, lastError string, now time.Time) error {
	if p == nil {
		return nil
	}
	// Most calls find nothing to do: read without a lock first.
	var n int64
	if err := db.WithContext(ctx).Table("webhook_health AS h").Where("h.webhook_id = ? AND "+unannounced(models.FailingAfter), webhookID).
		Count(&n).Error; err != nil {
		return fmt.Errorf("read health of webhook %s: %w", webhookID, err)
	}
	if n == 0 {
		return nil
	}
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var hs []models.WebhookHealth
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("webhook_id = ?", webhookID).Limit(1).Find(&hs).Error; err != nil {
			return fmt.Errorf("lock health of webhook %s: %w", webhookID, err)
		}
		if len(hs) == 0 {
			return nil
		}
		health := hs[0]
		recovered, failing := changes(health)
		if !recovered && !failing {
			return nil // another process announced it first
		}
		h, ok, err := readHook(tx, webhookID)
		if err != nil || !ok {
			return err
		}
		var announced *time.Time
		if failing {
			announced = health.FailingSince
		}
		if err := tx.Model(&models.WebhookHealth{}).Where("webhook_id = ?", webhookID).Update("announced_since", announced).Error; err != nil {
			return fmt.Errorf("announce health of webhook %s: %w", webhookID, err)
		}
		if h.DocType == DocType {
			return nil
		}
		if lastError == "" && health.ProbeID != nil {
			var errs []string
			if err := tx.Model(&models.Delivery{}).Where("id = ?", *health.ProbeID).Limit(1).Pluck("last_error", &errs).Error; err == nil && len(errs) > 0 {
				lastError = errs[0]
			}
		}
		link := p.link(webhookPath(h.Name))
		if recovered {
			since := *health.AnnouncedSince
			doc := map[string]any{
				"name": h.Name, "webhook": h.Name, "state": stateOf(h, models.WebhookHealth{}), "since": rfc3339(now),
				"failing_since": rfc3339(since), "failures": 0, "last_error": "",
				"reason": fmt.Sprintf("a delivery succeeded after failing since %s", rfc3339(since)), "link": link,
			}
			if err := p.publish(ctx, tx, h.Tenant, "homing:recovered:"+h.ID+":"+micros(since), Recovered, h.Name, doc, now); err != nil {
				return err
			}
		}
		if failing {
			since := *health.FailingSince
			doc := map[string]any{
				"name": h.Name, "webhook": h.Name, "state": "failing", "since": rfc3339(since),
				"failures": health.Failures, "last_error": lastError,
				"reason": fmt.Sprintf("%d failed attempts in a row since %s; retries go out one probe at a time until one succeeds", health.Failures, rfc3339(since)),
				"link":   link,
			}
			if err := p.publish(ctx, tx, h.Tenant, "homing:failing:"+h.ID+":"+micros(since), Failing, h.Name, doc, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// changes is the health rule of announcements: which events h owes.
func changes(h models.WebhookHealth) (recovered, failing bool) {
	episode := h.FailingSince != nil && h.Failures >= models.FailingAfter
	if h.AnnouncedSince != nil && (h.FailingSince == nil || !h.FailingSince.Equal(*h.AnnouncedSince)) {
		recovered = true
	}
	if episode && (h.AnnouncedSince == nil || !h.AnnouncedSince.Equal(*h.FailingSince)) {
		failing = true
	}
	return recovered, failing
}

// Reconcile announces every health change not yet announced, for the
// sweep: those whose attempt's process stopped before announcing them, and
// recoveries by a first attempt, whose claim did not read the webhook's
// health. It reads webhook_health whole (one row a webhook) and returns how
// many webhooks it announced.
func (p *Publisher) Reconcile(ctx context.Context, db *gorm.DB, now time.Time) (int, error) {
	if p == nil {
		return 0, nil
	}
	var ids []string
	if err := db.WithContext(ctx).Table("webhook_health AS h").Where(unannounced(models.FailingAfter)).Pluck("h.webhook_id", &ids).Error; err != nil {
		return 0, fmt.Errorf("read unannounced health: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if err := p.Announce(ctx, db, id, "", now); err != nil {
			errs = append(errs, err)
		}
	}
	return len(ids), errors.Join(errs...)
}
