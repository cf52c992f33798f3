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
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/clock"
	"github.com/homingdev/homing/event"
	"github.com/homingdev/homing/models"
)

// Default is the tenant every install has.
const Default = models.DefaultTenant

// Errors callers tell apart with errors.Is.
var (
	ErrNotFound    = errors.New("tenant not found")
	ErrExists      = errors.New("tenant already exists")
	ErrInvalid     = errors.New("invalid tenant request")
	ErrDisabled    = errors.New("tenant is disabled")
	ErrHasWebhooks = errors.New("tenant has webhooks")
)

// Tenant is a tenant as commands and the API show it.
type Tenant struct {
	Name          string    `json:"name"`
	Enabled       bool      `json:"enabled"`
	PortalOrigins []string  `json:"portal_origins"`
	MaxWebhooks   int       `json:"max_webhooks"`
	PublishRate   int       `json:"publish_rate"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func viewOf(m models.Tenant) Tenant {
	origins := []string(m.PortalOrigins)
	if origins == nil {
		origins = []string{}
	}
	return Tenant{Name: m.Name, Enabled: m.Enabled, PortalOrigins: origins, MaxWebhooks: m.MaxWebhooks,
		PublishRate: m.PublishRate, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

// Patch is a change to a tenant: only the fields set change.
type Patch struct {
	Enabled       *bool     `json:"enabled,omitempty"`
	PortalOrigins *[]string `json:"portal_origins,omitempty"`
	MaxWebhooks   *int      `json:"max_webhooks,omitempty"`
	PublishRate   *int      `json:"publish_rate,omitempty"`
}

// WebhookDeleter deletes a tenant's webhook as homing webhook delete does
// (webhook.Service): Delete --force goes through it, so that the webhook's
// pending deliveries are made final the same way.
type WebhookDeleter interface {
	Delete(ctx context.Context, tenant, name string) error
}

// Service creates, changes and reads tenants.
type Service struct {
	db       *gorm.DB
	clock    clock.Clock
	log      *slog.Logger
	seen     seen
	observer Observer
}

// Observer is told of deliveries the service made final: n of webhook's
// pending retries Exhausted for reason (models.ReasonTenantDisabled) by
// disabling their tenant. dispatch.Dispatcher is one: it passes them to the
// process's metrics, or hands them off to a worker's (package handoff).
type Observer interface {
	Deliveries(tenant, webhook, status, reason string, n int)
}

// SetObserver sets who is told of the deliveries the service exhausts;
// nil is no one. Call it before the service is in use.
func (s *Service) SetObserver(o Observer) { s.observer = o }

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
	m := models.Tenant{Name: name, Enabled: true, PortalOrigins: models.StringList{}, CreatedAt: now, UpdatedAt: now}
	if err := apply(&m, p); err != nil {
		return Tenant{}, err
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
	return nil
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

// Update changes the fields of p in tenant name. Disabling it makes its
// pending retries Exhausted ("tenant disabled") in the same transaction;
// homing delivery recover sends them again once it is enabled.
func (s *Service) Update(ctx context.Context, name string, p Patch) (Tenant, error) {
	m, err := s.get(ctx, s.db, name)
	if err != nil {
		return Tenant{}, err
	}
	wasEnabled := m.Enabled
	if err := apply(&m, p); err != nil {
		return Tenant{}, err
	}
	m.UpdatedAt = s.now()
	var exhausted int64
	byWebhook := map[string]int{}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Model(&models.Tenant{}).Where("name = ?", name).
			Updates(map[string]any{"enabled": m.Enabled, "portal_origins": m.PortalOrigins, "max_webhooks": m.MaxWebhooks,
				"publish_rate": m.PublishRate, "updated_at": m.UpdatedAt}).Error; err != nil {
			return fmt.Errorf("update tenant %q: %w", name, err)
		}
		if !wasEnabled || m.Enabled {
			return nil
		}
		// A disabled tenant's webhooks fire no more: its pending retries
		// are made final now, as a disabled webhook's are, rather than
		// sent when they come due (the claim does not read the tenant, to
		// stay one statement). Served by deliveries_tenant_created.
		// RETURNING names each row's webhook, for the counts by webhook
		// (PostgreSQL, and SQLite from 3.35).
		rows, err := tx.Raw("UPDATE deliveries SET status = ?, next_retry = NULL, last_error = ?, updated_at = ? WHERE tenant = ? AND status = ? RETURNING webhook_name",
			models.StatusExhausted, "tenant disabled", m.UpdatedAt, name, models.StatusFailed).Rows()
		if err != nil {
			return fmt.Errorf("exhaust pending deliveries of tenant %q: %w", name, err)
		}
		defer rows.Close()
		for rows.Next() {
			var hook string
			if err := rows.Scan(&hook); err != nil {
				return fmt.Errorf("exhaust pending deliveries of tenant %q: %w", name, err)
			}
			byWebhook[hook]++
			exhausted++
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("exhaust pending deliveries of tenant %q: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return Tenant{}, err
	}
	if s.observer != nil {
		for hook, n := range byWebhook {
			s.observer.Deliveries(name, hook, models.StatusExhausted, models.ReasonTenantDisabled, n)
		}
	}
	s.seen.forget()
	s.log.Info("tenant updated", "tenant", name, "enabled", m.Enabled, "pending_exhausted", exhausted)
	return viewOf(m), nil
}

// Delete removes tenant name and its tokens. It refuses while the tenant
// has webhooks unless force, which deletes each through hooks first. The
// tenant's deliveries stay for inspection, as a deleted webhook's do.
// 'default' cannot be deleted.
func (s *Service) Delete(ctx context.Context, name string, force bool, hooks WebhookDeleter) error {
	if name == Default {
		return fmt.Errorf("%w: the default tenant cannot be deleted", ErrInvalid)
	}
	if _, err := s.get(ctx, s.db, name); err != nil {
		return err
	}
	var names []string
	// Served by webhooks_tenant_name (tenant, name).
	if err := s.db.WithContext(ctx).Model(&models.Webhook{}).Where("tenant = ?", name).Order("name").Pluck("name", &names).Error; err != nil {
		return fmt.Errorf("read webhooks of tenant %q: %w", name, err)
	}
	if len(names) > 0 && !force {
		return fmt.Errorf("%w: %q has %d webhooks (delete them first, or give --force to delete them too)", ErrHasWebhooks, name, len(names))
	}
	for _, n := range names {
		if err := hooks.Delete(ctx, name, n); err != nil {
			return fmt.Errorf("delete tenant %q: %w", name, err)
		}
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var left int64
		if err := tx.Model(&models.Webhook{}).Where("tenant = ?", name).Count(&left).Error; err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("%w: %q gained webhooks while it was being deleted; try again", ErrHasWebhooks, name)
		}
		if err := tx.Where("tenant = ?", name).Delete(&models.APIToken{}).Error; err != nil {
			return fmt.Errorf("revoke tokens of tenant %q: %w", name, err)
		}
		if err := tx.Where("tenant = ?", name).Delete(&models.PortalLink{}).Error; err != nil {
			return fmt.Errorf("revoke portal links of tenant %q: %w", name, err)
		}
		res := tx.Where("name = ?", name).Delete(&models.Tenant{})
		if res.Error != nil {
			return fmt.Errorf("delete tenant %q: %w", name, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.seen.forget()
	s.log.Info("tenant deleted", "tenant", name, "webhooks_deleted", len(names))
	return nil
}
