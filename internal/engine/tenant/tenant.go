// Package tenant is the set of tenants one Homing serves (issue 26): a
// tenant is a site or customer whose webhooks, events, deliveries and
// tokens are apart from every other's. Its name is its key in every table
// (the tenant column) and never changes; 'default' always exists and holds
// everything an install that never names a tenant does.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/models"
)

// Default is the tenant every install has.
const Default = models.DefaultTenant

// Errors callers tell apart with errors.Is.
var (
	ErrNotFound = errors.New("tenant not found")
	ErrExists   = errors.New("tenant already exists")
	ErrInvalid  = errors.New("invalid tenant request")
	ErrDisabled = errors.New("tenant is disabled")
	// ErrHasWebhooks refuses a delete without force of a tenant that has
	// webhooks or deliveries: deleting it deletes them.
	ErrHasWebhooks = errors.New("tenant has webhooks or deliveries")
)

// EnabledRows is the condition that a row's tenant column names an enabled
// tenant: for the counts of what the system owes (the due backlog), which
// leave out what a disabled tenant holds. Served by tenants' primary key,
// once per query.
const EnabledRows = "tenant IN (SELECT name FROM tenants WHERE enabled)"

// Tenant is a tenant as commands and the API show it.
type Tenant struct {
	Name          string   `json:"name"`
	Enabled       bool     `json:"enabled"`
	PortalOrigins []string `json:"portal_origins"`
	MaxWebhooks   int      `json:"max_webhooks"`
	PublishRate   int      `json:"publish_rate"`
	// Queues are the queues besides models.DefaultQueue its webhooks may
	// use; only an operator sets them.
	Queues     []string `json:"queues"`
	ActionRate int      `json:"action_rate"`
	// PortalAdvanced shows the operator's webhook settings in the
	// tenant's portal; EventTypes are the "Doctype:event" pairs its
	// portal offers besides those its deliveries record.
	PortalAdvanced bool     `json:"portal_advanced"`
	EventTypes     []string `json:"event_types"`
	// Theme is what its portal shows instead of Homing.
	Theme
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func viewOf(m models.Tenant) Tenant {
	origins := []string(m.PortalOrigins)
	if origins == nil {
		origins = []string{}
	}
	queues := []string(m.Queues)
	if queues == nil {
		queues = []string{}
	}
	eventTypes := []string(m.EventTypes)
	if eventTypes == nil {
		eventTypes = []string{}
	}
	return Tenant{Name: m.Name, Enabled: m.Enabled, PortalOrigins: origins, MaxWebhooks: m.MaxWebhooks,
		PublishRate: m.PublishRate, ActionRate: m.ActionRate, Queues: queues,
		PortalAdvanced: m.PortalAdvanced, EventTypes: eventTypes, Theme: ThemeOf(m), CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

// Patch is a change to a tenant: only the fields set change.
type Patch struct {
	Enabled       *bool     `json:"enabled,omitempty"`
	PortalOrigins *[]string `json:"portal_origins,omitempty"`
	MaxWebhooks   *int      `json:"max_webhooks,omitempty"`
	PublishRate   *int      `json:"publish_rate,omitempty"`
	ActionRate    *int      `json:"action_rate,omitempty"`
	// Queues replaces the tenant's queues; an empty list leaves it
	// models.DefaultQueue only.
	Queues *[]string `json:"queues,omitempty"`
	// PortalAdvanced shows (true) or hides the operator's webhook settings
	// in the tenant's portal.
	PortalAdvanced *bool `json:"portal_advanced,omitempty"`
	// EventTypes replaces the "Doctype:event" pairs declared for the
	// tenant's portal.
	EventTypes *[]string `json:"event_types,omitempty"`
	// The theme (Theme): each given replaces the tenant's; "" unsets it.
	ProductName *string `json:"product_name,omitempty"`
	LogoURL     *string `json:"logo_url,omitempty"`
	AccentColor *string `json:"accent_color,omitempty"`
	SupportURL  *string `json:"support_url,omitempty"`
}

// WebhookDeleter deletes a tenant's webhook as homing webhook delete does
// (webhook.Service): Delete --force goes through it, so that the webhook's
// pending deliveries are made final the same way.
type WebhookDeleter interface {
	Delete(ctx context.Context, tenant, name string) error
}

// EventTasks deletes the fan-out tasks of a tenant's events still queued in
// Redis (event.QueuedTasks), and counts those running now.
type EventTasks interface {
	Drop(ctx context.Context, tenant string) (dropped, running int, err error)
}

// Service creates, changes and reads tenants.
type Service struct {
	db    *gorm.DB
	clock clock.Clock
	log   *slog.Logger
	seen  seen
	tasks EventTasks
}

// SetEventTasks gives Delete the queue it empties of the tenant's event
// tasks. Every command and serve set it; a Service without one (a test of
// the tables alone) leaves Redis as it is.
func (s *Service) SetEventTasks(q EventTasks) { s.tasks = q }

// New builds a Service.
func New(db *gorm.DB, clk clock.Clock, log *slog.Logger) *Service {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{db: db, clock: clk, log: log}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// CheckName refuses a name that cannot name a tenant, saying what can.
func CheckName(name string) error {
	if !event.ValidTenant(name) {
		return fmt.Errorf("%w: name %q must be 1 to 63 of a-z, 0-9, '-' and '_', starting with a letter or digit", ErrInvalid, name)
	}
	return nil
}

// OverflowLabel is the tenant label metrics give every tenant past
// metrics.max_tenant_labels (metrics.OtherWebhooks). No tenant may take it
// as its name, or its deliveries would be counted with the overflow's.
const OverflowLabel = "other"

// Create adds tenant name, enabled, with the settings of p.
func (s *Service) Create(ctx context.Context, name string, p Patch) (Tenant, error) {
	if name == OverflowLabel {
		return Tenant{}, fmt.Errorf("%w: name %q is reserved (metrics count the tenants beyond metrics.max_tenant_labels as tenant=%q); choose another name", ErrInvalid, name, OverflowLabel)
	}
	if err := CheckName(name); err != nil {
		return Tenant{}, err
	}
	now := s.now()
	m := models.Tenant{Name: name, Enabled: true, PortalOrigins: models.StringList{}, Queues: models.StringList{}, EventTypes: models.StringList{}, CreatedAt: now, UpdatedAt: now}
	if err := apply(&m, p); err != nil {
		return Tenant{}, err
	}
	// A name is free only once everything of an earlier tenant of that
	// name is gone: a tenant starts empty, and never inherits another's
	// deliveries or event IDs (an ID it publishes is not taken for a
	// repeat of theirs).
	if left, err := leftovers(ctx, s.db, name); err != nil {
		return Tenant{}, err
	} else if left.any() {
		return Tenant{}, fmt.Errorf("%w: %q still holds the %s of an earlier tenant of that name; homing tenant delete %s --force removes them", ErrExists, name, left, name)
	}
	if err := s.db.WithContext(ctx).Create(&m).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return Tenant{}, fmt.Errorf("%w: %q (see homing tenant list)", ErrExists, name)
		}
		return Tenant{}, fmt.Errorf("create tenant %q: %w", name, err)
	}
	s.log.Info("tenant created", "tenant", name)
	return viewOf(m), nil
}

func apply(m *models.Tenant, p Patch) error {
	if p.Enabled != nil {
		if !*p.Enabled && m.Name == Default {
			return fmt.Errorf("%w: the default tenant cannot be disabled", ErrInvalid)
		}
		m.Enabled = *p.Enabled
	}
	if p.PortalOrigins != nil {
		m.PortalOrigins = models.StringList(*p.PortalOrigins)
	}
	if p.MaxWebhooks != nil {
		if *p.MaxWebhooks < 0 {
			return fmt.Errorf("%w: max_webhooks %d is negative (0 means no limit)", ErrInvalid, *p.MaxWebhooks)
		}
		m.MaxWebhooks = *p.MaxWebhooks
	}
	if p.PublishRate != nil {
		if *p.PublishRate < 0 {
			return fmt.Errorf("%w: publish_rate %d is negative (0 means no limit)", ErrInvalid, *p.PublishRate)
		}
		m.PublishRate = *p.PublishRate
	}
	if p.Queues != nil {
		queues := models.StringList{}
		for _, q := range *p.Queues {
			q = strings.TrimSpace(q)
			if msg := models.CheckQueue(q); msg != "" {
				return fmt.Errorf("%w: queues: %s", ErrInvalid, msg)
			}
			if q != models.DefaultQueue && !slices.Contains(queues, q) {
				queues = append(queues, q)
			}
		}
		m.Queues = queues

	}
	if p.ActionRate != nil {
		if *p.ActionRate < 0 {
			return fmt.Errorf("%w: action_rate %d is negative (0 means no limit)", ErrInvalid, *p.ActionRate)
		}
		m.ActionRate = *p.ActionRate
	}
	if p.PortalAdvanced != nil {
		m.PortalAdvanced = *p.PortalAdvanced
	}
	if p.EventTypes != nil {
		list, err := eventTypes(*p.EventTypes)
		if err != nil {
			return err
		}
		m.EventTypes = list
	}
	return applyTheme(m, p)
}

// Get reads tenant name.
func (s *Service) Get(ctx context.Context, name string) (Tenant, error) {
	m, err := s.get(ctx, s.db, name)
	return viewOf(m), err
}

func (s *Service) get(ctx context.Context, db *gorm.DB, name string) (models.Tenant, error) {
	var m models.Tenant
	err := db.WithContext(ctx).Where("name = ?", name).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return m, fmt.Errorf("%w: %q (see homing tenant list)", ErrNotFound, name)
	}
	if err != nil {
		return m, fmt.Errorf("read tenant %q: %w", name, err)
	}
	return m, nil
}

// Exists reports whether tenant name exists, as Lookup found it: what a
// request naming a tenant checks.
func (s *Service) Exists(ctx context.Context, name string) (bool, error) {
	m, err := s.Lookup(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return m.Name != "", err
}

// Lookup reads tenant name through a cache of seenTTL: every publish and
// every request naming a tenant asks, and a tenant changes rarely. A
// change made here is seen here at once; other processes see it within
// seenTTL.
func (s *Service) Lookup(ctx context.Context, name string) (models.Tenant, error) {
	name = models.TenantOr(name)
	now := s.clock.Now()
	if m, ok := s.seen.get(name, now); ok {
		return m, nil
	}
	m, err := s.get(ctx, s.db, name)
	if err != nil {
		return m, err
	}
	s.seen.put(m, now)
	return m, nil
}

// Usable reads tenant name and refuses it when it does not exist
// (ErrNotFound) or is disabled (ErrDisabled): what publishing to it checks.
func (s *Service) Usable(ctx context.Context, name string) error {
	m, err := s.Lookup(ctx, name)
	if err != nil {
		return err
	}
	if !m.Enabled {
		return fmt.Errorf("%w: %q accepts no events (enable it with homing tenant update %s --enable)", ErrDisabled, m.Name, m.Name)
	}
	return nil
}

// RequireEnabled refuses tenant name when it is disabled (ErrDisabled) or
// does not exist (ErrNotFound): what every operator's path that would send
// a delivery of the tenant (a retry, a resend, a recover, a webhook's test
// send) asks first, to answer with why nothing will be sent. It reads db,
// not Lookup's cache, so a disable is seen at once. The claim, which reads
// the tenant in its own statement, is what keeps a request from leaving
// (storage.Store.Claim); this is the clear answer in front of it.
func RequireEnabled(ctx context.Context, db *gorm.DB, name string) error {
	name = models.TenantOr(name)
	var enabled []bool
	// Served by tenants' primary key.
	if err := db.WithContext(ctx).Model(&models.Tenant{}).Where("name = ?", name).Pluck("enabled", &enabled).Error; err != nil {
		return fmt.Errorf("read tenant %q: %w", name, err)
	}
	switch {
	case len(enabled) == 0:
		return fmt.Errorf("%w: %q (see homing tenant list)", ErrNotFound, name)
	case !enabled[0]:
		return fmt.Errorf("%w: %q sends nothing until it is enabled again (homing tenant update %s --enable); its deliveries are kept", ErrDisabled, name, name)
	}
	return nil
}

// List reads every tenant, by name.
func (s *Service) List(ctx context.Context) ([]Tenant, error) {
	var ms []models.Tenant
	if err := s.db.WithContext(ctx).Order("name").Find(&ms).Error; err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out := make([]Tenant, len(ms))
	for i, m := range ms {
		out[i] = viewOf(m)
	}
	return out, nil
}

// Update changes the fields of p in tenant name.
//
// Disabling a tenant stops everything of it from leaving, and ends
// nothing: no claim of its deliveries is taken from the commit on (the
// claim's statement reads the tenant, storage.Store.Claim), the sweep
// leaves its due rows alone, fan-out keeps its events, and its pending
// deliveries stay Failed and due, held. An attempt claimed before the
// commit is in flight and ends with its real outcome (Delivered on a
// 2xx). Enabling it releases them: the next sweep takes every delivery
// that came due meanwhile, each once.
func (s *Service) Update(ctx context.Context, name string, p Patch) (Tenant, error) {
	m, err := s.get(ctx, s.db, name)
	if err != nil {
		return Tenant{}, err
	}
	if err := apply(&m, p); err != nil {
		return Tenant{}, err
	}
	m.UpdatedAt = s.now()
	if err := s.db.WithContext(ctx).Model(&models.Tenant{}).Where("name = ?", name).
		Updates(map[string]any{"enabled": m.Enabled, "portal_origins": m.PortalOrigins, "max_webhooks": m.MaxWebhooks,
			"publish_rate": m.PublishRate, "action_rate": m.ActionRate, "queues": m.Queues,
			"portal_advanced": m.PortalAdvanced, "event_types": m.EventTypes, "product_name": m.ProductName,
			"logo_url": m.LogoURL, "accent_color": m.AccentColor, "support_url": m.SupportURL, "updated_at": m.UpdatedAt}).Error; err != nil {
		return Tenant{}, fmt.Errorf("update tenant %q: %w", name, err)
	}
	s.seen.forget()
	s.log.Info("tenant updated", "tenant", name, "enabled", m.Enabled)
	return viewOf(m), nil
}

// Delete removes tenant name and everything of it: its webhooks (each
// through hooks, as homing webhook delete does), its deliveries with their
// attempts, its published event IDs, outbox rows and console rollups, its
// tokens and portal links, and last its row. It refuses while the tenant
// has webhooks or deliveries unless force. 'default' cannot be deleted.
//
// The tenant is disabled first, so that nothing of it is published or sent
// while its data goes, and its row goes last, in a batch of its own, so
// that the name cannot be created again until its data is gone; a delete
// cut short (the process stopped, the database away) leaves the tenant
// disabled and is run again to finish. A name whose row is gone but whose
// data is left (a delete before issue 35 kept deliveries) is deleted the
// same way.
func (s *Service) Delete(ctx context.Context, name string, force bool, hooks WebhookDeleter) error {
	if name == Default {
		return fmt.Errorf("%w: the default tenant cannot be deleted", ErrInvalid)
	}
	m, getErr := s.get(ctx, s.db, name)
	exists := getErr == nil
	if getErr != nil && !errors.Is(getErr, ErrNotFound) {
		return getErr
	}
	var names []string
	// Served by webhooks_tenant_name (tenant, name).
	if err := s.db.WithContext(ctx).Model(&models.Webhook{}).Where("tenant = ?", name).Order("name").Pluck("name", &names).Error; err != nil {
		return fmt.Errorf("read webhooks of tenant %q: %w", name, err)
	}
	left, err := leftovers(ctx, s.db, name)
	if err != nil {
		return err
	}
	if !exists && !left.any() {
		return getErr
	}
	if !force && (len(names) > 0 || left.deliveries) {
		what := "deliveries"
		if len(names) > 0 {
			what = fmt.Sprintf("%d webhooks", len(names))
			if len(names) == 1 {
				what = "1 webhook"
			}
		}
		return fmt.Errorf("%w: %q has %s (give --force to delete the tenant with all of its webhooks, deliveries and events)", ErrHasWebhooks, name, what)
	}
	if exists && m.Enabled {
		if err := s.db.WithContext(ctx).Model(&models.Tenant{}).Where("name = ?", name).
			Updates(map[string]any{"enabled": false, "updated_at": s.now()}).Error; err != nil {
			return fmt.Errorf("disable tenant %q to delete it: %w", name, err)
		}
		s.seen.forget()
	}
	for _, n := range names {
		if err := hooks.Delete(ctx, name, n); err != nil {
			return fmt.Errorf("delete tenant %q: %w", name, err)
		}
	}
	gone, err := purge(ctx, s.db, name)
	if err != nil {
		return fmt.Errorf("delete tenant %q: %w (run the delete again to finish; the tenant stays disabled)", name, err)
	}
	dropped, err := s.dropTasks(ctx, name)
	if err != nil {
		return fmt.Errorf("delete tenant %q: %w (run the delete again to finish; the tenant stays disabled)", name, err)
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var hooksLeft int64
		if err := tx.Model(&models.Webhook{}).Where("tenant = ?", name).Count(&hooksLeft).Error; err != nil {
			return err
		}
		if hooksLeft > 0 {
			return fmt.Errorf("%w: %q gained webhooks while it was being deleted; try again", ErrHasWebhooks, name)
		}
		if err := tx.Where("tenant = ?", name).Delete(&models.APIToken{}).Error; err != nil {
			return fmt.Errorf("revoke tokens of tenant %q: %w", name, err)
		}
		if err := tx.Where("tenant = ?", name).Delete(&models.PortalLink{}).Error; err != nil {
			return fmt.Errorf("revoke portal links of tenant %q: %w", name, err)
		}
		if err := tx.Where("name = ?", name).Delete(&models.Tenant{}).Error; err != nil {
			return fmt.Errorf("delete tenant %q: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.seen.forget()
	s.log.Info("tenant deleted", "tenant", name, "webhooks_deleted", len(names), "deliveries_deleted", gone.deliveries,
		"event_ids_deleted", gone.events, "outbox_deleted", gone.outbox, "rollup_deleted", gone.rollup, "queued_events_deleted", dropped)
	return nil
}

// dropWait is how long Delete waits for a tenant's fan-outs running at the
// time to end, looking every dropPoll; a fan-out sends its first attempts
// itself, so one may take a receiver's timeout.
const (
	dropWait = 20 * time.Second
	dropPoll = 500 * time.Millisecond
)

// dropTasks deletes the tenant's event tasks still queued in Redis, until
// a pass finds none queued and none running: a running fan-out may fail
// into the retry set, and a page of a queue that workers consume may skip
// a task. Until then the tenant's row stays, so its name cannot be created
// again with its events still queued.
func (s *Service) dropTasks(ctx context.Context, name string) (int, error) {
	if s.tasks == nil {
		return 0, nil
	}
	total := 0
	for waited := time.Duration(0); ; waited += dropPoll {
		dropped, running, err := s.tasks.Drop(ctx, name)
		total += dropped
		if err != nil {
			return total, err
		}
		if dropped == 0 && running == 0 {
			return total, nil
		}
		if waited >= dropWait {
			return total, fmt.Errorf("%d of its events are being fanned out now, and were still after %s", running, dropWait)
		}
		if err := s.clock.Sleep(ctx, dropPoll); err != nil {
			return total, err
		}
	}
}

// remains says which kinds of a tenant's data exist.
type remains struct{ deliveries, events, outbox, rollup bool }

func (r remains) any() bool { return r.deliveries || r.events || r.outbox || r.rollup }

// String names what remains: "deliveries, published event IDs".
func (r remains) String() string {
	var kinds []string
	for _, k := range []struct {
		on   bool
		name string
	}{{r.deliveries, "deliveries"}, {r.events, "published event IDs"}, {r.outbox, "outbox events"}, {r.rollup, "console rollups"}} {
		if k.on {
			kinds = append(kinds, k.name)
		}
	}
	return strings.Join(kinds, ", ")
}

// leftovers reads which of tenant name's data exists, whether or not it
// has a row: a delivery (attempts go with their delivery), a published
// event ID, an outbox row, a console rollup. Tokens, portal links,
// published event types and webhooks cannot outlive the row (foreign
// keys). Served by
// deliveries_tenant_created, and the primary keys of published_events and
// activity_rollup; outbox_events, which holds only events not fanned out
// yet, is read whole.
func leftovers(ctx context.Context, db *gorm.DB, name string) (remains, error) {
	var r remains
	for _, k := range []struct {
		model any
		found *bool
	}{{&models.Delivery{}, &r.deliveries}, {&models.PublishedEvent{}, &r.events}, {&models.OutboxEvent{}, &r.outbox}, {&models.ActivityHour{}, &r.rollup}} {
		var one []string
		if err := db.WithContext(ctx).Model(k.model).Where("tenant = ?", name).Limit(1).Pluck("tenant", &one).Error; err != nil {
			return r, fmt.Errorf("read what is left of tenant %q: %w", name, err)
		}
		*k.found = len(one) > 0
	}
	return r, nil
}

// purgeBatch is how many rows one statement of purge deletes.
const purgeBatch = 1000

// purged counts what purge deleted.
type purged struct{ deliveries, events, outbox, rollup int64 }

// purge deletes tenant name's deliveries (their attempts go with them: ON
// DELETE CASCADE), published event IDs, outbox rows and console rollups,
// the large ones a batch at a time so that no statement holds locks on a
// whole tenant's rows. Safe to run again after it was cut short.
func purge(ctx context.Context, db *gorm.DB, name string) (purged, error) {
	var p purged
	for {
		var ids []string
		// Served by deliveries_tenant_created (tenant, …).
		if err := db.WithContext(ctx).Model(&models.Delivery{}).Where("tenant = ?", name).Limit(purgeBatch).Pluck("id", &ids).Error; err != nil {
			return p, fmt.Errorf("select deliveries: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		res := db.WithContext(ctx).Where("id IN ?", ids).Delete(&models.Delivery{})
		if res.Error != nil {
			return p, fmt.Errorf("delete deliveries: %w", res.Error)
		}
		p.deliveries += res.RowsAffected
	}
	for {
		var keys []string
		// Served by published_events' primary key (tenant, event_id).
		if err := db.WithContext(ctx).Model(&models.PublishedEvent{}).Where("tenant = ?", name).Limit(purgeBatch).Pluck("event_id", &keys).Error; err != nil {
			return p, fmt.Errorf("select published event IDs: %w", err)
		}
		if len(keys) == 0 {
			break
		}
		res := db.WithContext(ctx).Where("tenant = ? AND event_id IN ?", name, keys).Delete(&models.PublishedEvent{})
		if res.Error != nil {
			return p, fmt.Errorf("delete published event IDs: %w", res.Error)
		}
		p.events += res.RowsAffected
	}
	res := db.WithContext(ctx).Where("tenant = ?", name).Delete(&models.OutboxEvent{})
	if res.Error != nil {
		return p, fmt.Errorf("delete outbox events: %w", res.Error)
	}
	p.outbox = res.RowsAffected
	// Served by activity_rollup's primary key (tenant, …).
	if res = db.WithContext(ctx).Where("tenant = ?", name).Delete(&models.ActivityHour{}); res.Error != nil {
		return p, fmt.Errorf("delete console rollups: %w", res.Error)
	}
	p.rollup = res.RowsAffected
	return p, nil
}
