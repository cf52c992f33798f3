// Package webhook manages webhook definitions: validation with errors that
// say what to fix, secrets sealed at rest, and the JSON view shown to people
// and scripts (which never includes a secret).
package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/homingdev/homing/internal/engine/delivery"
	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/condition"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/delivery/template"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/engine/signing"
	tenantpkg "github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/models"
)

// Errors callers tell apart with errors.Is.
var (
	ErrNotFound = errors.New("webhook not found")
	ErrExists   = errors.New("webhook already exists")
	ErrInvalid  = errors.New("invalid webhook")
	// ErrLimit is a create refused because the tenant holds its
	// max_webhooks.
	ErrLimit = errors.New("tenant webhook limit reached")
)

// FieldError is webhook input that cannot be accepted, naming the field at
// fault, so that the command line and the API can each point at it in their
// own terms. It matches ErrInvalid with errors.Is, and its cause, if any,
// through Unwrap.
type FieldError struct {
	// Field is the field at fault as the command line's flag names it:
	// "url", "max-retries", "field", "header".
	Field string
	// Message says what is wrong and what to do, starting with Field:
	// `url: "ftp://x" is not http(s)`.
	Message string
	// Err is the underlying cause, when there is one.
	Err error
}

func (e *FieldError) Error() string { return ErrInvalid.Error() + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// Limits on webhook fields.
const (
	MaxNameLength    = 140
	MaxRetriesLimit  = 100
	MinTimeout       = 100 * time.Millisecond
	MaxTimeout       = 5 * time.Minute
	MaxRotationGrace = 7 * 24 * time.Hour
	// DefaultRotationGrace is how long a rotated-out secret stays valid
	// unless told otherwise (rotate-secret --grace, the console's button).
	DefaultRotationGrace = 24 * time.Hour
	MaxRateLimit         = 100000
	// MaxFollowRedirects is requests' own limit (Frappe's sender).
	MaxFollowRedirects = 30
)

// Methods a webhook may use.
var Methods = []string{"POST", "PUT", "PATCH", "DELETE"}

// Input is a webhook definition as given by a person or an API call. A nil
// field is "not given": defaults on Create, unchanged on Update.
type Input struct {
	Name      *string
	DocType   *string
	Event     *string
	URL       *string
	Method    *string
	Structure *string
	Template  *string
	Fields    *[]string // "fieldname=key"
	Headers   *[]string // "Name: Value"; credential headers are sealed
	// SecretHeaders are "Name: Value" headers stored sealed and masked in
	// every view, whatever their name.
	SecretHeaders *[]string
	// SampleDoc, when set, is the document Create and Update render the
	// template and evaluate the condition against, refusing the webhook if
	// either fails. Without it they use an empty document and refuse only
	// what fails whatever the document (limits, unknown filters, functions
	// and tests).
	SampleDoc  map[string]any
	Condition  *string
	Secret     *string // plain secret; sealed before it is stored
	Signature  *string // both, standard, frappe, none
	MaxRetries *int
	Timeout    *time.Duration
	Queue      *string
	Enabled    *bool
	// RateLimit is the most requests a second to this webhook, across
	// every worker; 0 is unlimited.
	RateLimit *int
	// FollowRedirects is how many redirects an attempt follows (0, the
	// default, makes a 3xx a failure; at most MaxFollowRedirects).
	FollowRedirects *int
	// URLTemplate, when not empty, is rendered with the document per
	// event and used instead of URL (Frappe's is_dynamic_url); "" removes
	// it.
	URLTemplate *string
	// ConditionLanguage is "expr" (the default) or "python" (Frappe's
	// conditions: the subset of Python they use, with Python's semantics).
	ConditionLanguage *string
	// Compat is "" (Homing's bodies) or "frappe" (the bytes Frappe sends:
	// json.dumps of the data rows or the rendered template, {} when
	// neither, the Content-Type only from the headers, Frappe's Jinja).
	Compat *string
	// Description is the webhook in its owner's words (at most
	// MaxDescriptionLength bytes); nothing reads it to deliver.
	Description *string
	// Ordering is "none" (the default: deliveries race as they always
	// have) or "document": the deliveries of one document are sent in the
	// order their events were accepted, each once the one before it is
	// final. "document" needs PostgreSQL.
	Ordering *string
}

// MaxDescriptionLength bounds a webhook's description.
const MaxDescriptionLength = 500

// Defaults fill what Create's input leaves out.
type Defaults struct {
	MaxRetries int
	Timeout    time.Duration
	// MaxPayloadBytes caps rendered bodies (delivery.max_payload_bytes).
	MaxPayloadBytes int
	// UserAgent is what the sender adds to every request, shown by
	// Preview.
	UserAgent string
	// Guard, when set, refuses URLs whose host resolves to an address
	// deliveries may not reach (the SSRF guard; sends are checked again at
	// dial time).
	Guard *send.Guard
	// RenderTimeLimit is the time limit of a body or URL template's
	// rendering when a definition is checked or previewed
	// (delivery.template_time_limit); 0 is template.MaxRenderTime. Tests
	// set a tiny one to meet the limit without load, or one out of reach
	// to meet only steps and bytes.
	RenderTimeLimit time.Duration
	// ConditionTimeLimit is the time limit of a condition's evaluation
	// there (delivery.condition_time_limit); 0 is
	// condition.MaxTime.
	ConditionTimeLimit time.Duration
}

// Service creates, changes and reads webhooks.
type Service struct {
	db       *gorm.DB
	box      *secretbox.Box
	clock    clock.Clock
	defaults Defaults
	log      *slog.Logger
	observer Observer
	// sender, limiter and tests are TestSend's (SetSender).
	sender  *send.Sender
	limiter Limiter
	tests   localBudget
	// actions charges test sends to their tenant's action_rate
	// (SetActions); nil charges nothing.
	actions *tenantpkg.Actions
}

// New builds a Service.
func New(db *gorm.DB, box *secretbox.Box, clk clock.Clock, defaults Defaults, log *slog.Logger) *Service {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{db: db, box: box, clock: clk, defaults: defaults, log: log}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// Create validates in and stores a new webhook.
func (s *Service) Create(ctx context.Context, tenant string, in Input) (models.Webhook, error) {
	now := s.now()
	w := models.Webhook{
		ID:                uuid.Must(uuid.NewV7()).String(),
		Tenant:            models.TenantOr(tenant),
		RequestMethod:     "POST",
		RequestStructure:  delivery.StructureJSON,
		Fields:            models.FieldList{},
		Headers:           models.StringMap{},
		PreviousSecrets:   models.SecretList{},
		SignatureScheme:   signing.SchemeBoth,
		ConditionLanguage: models.ConditionExpr,
		Ordering:          models.OrderingNone,
		Enabled:           true,
		MaxRetries:        s.defaults.MaxRetries,
		Queue:             models.DefaultQueue,
		TimeoutMS:         s.defaults.Timeout.Milliseconds(),
		CreatedAt:         now,
		UpdatedAt:         now,
	}
	if w.TimeoutMS <= 0 {
		w.TimeoutMS = (5 * time.Second).Milliseconds()
	}
	for _, req := range []struct {
		v    *string
		flag string
	}{{in.Name, "name"}, {in.DocType, "doctype"}, {in.Event, "event"}, {in.URL, "url"}} {
		if req.flag == "url" && in.URLTemplate != nil && strings.TrimSpace(*in.URLTemplate) != "" && req.v == nil {
			continue // the URL comes from the template
		}
		if req.v == nil || strings.TrimSpace(*req.v) == "" {
			return w, &FieldError{Field: req.flag, Message: req.flag + " is required (or, for a URL made from the document, url-template)"}
		}
	}
	if err := s.apply(&w, in); err != nil {
		return w, err
	}
	if err := s.checkTarget(ctx, w.RequestURL); err != nil {
		return w, err
	}
	if err := s.tryDefinition(w, in.SampleDoc); err != nil {
		return w, err
	}
	if err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := underLimit(tx, w.Tenant); err != nil {
			return err
		}
		if err := queueAllowed(tx, w.Tenant, w.Queue); err != nil {
			return err
		}
		return tx.Create(&w).Error
	}); err != nil {
		if errors.Is(err, ErrLimit) || errors.As(err, new(*FieldError)) {
			return w, err
		}
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return w, fmt.Errorf("%w: %q (choose another name, or use webhook update)", ErrExists, w.Name)
		}
		return w, fmt.Errorf("create webhook %q: %w", w.Name, err)
	}
	s.log.Info("webhook created", "tenant", w.Tenant, "webhook", w.Name, "doc_type", w.DocType, "event", w.DocEvent)
	return w, nil
}

// underLimit refuses a new webhook of tenant when it already holds its
// max_webhooks (0 is no limit). It runs in the insert's transaction and
// first locks the tenant's row (FOR UPDATE on PostgreSQL; SQLite has one
// writer), so two concurrent creates count one after the other and cannot
// pass the limit together. Served by tenants' primary key and
// webhooks_tenant_name (tenant, name).
func underLimit(tx *gorm.DB, tenant string) error {
	var t models.Tenant
	q := tx.Select("name", "max_webhooks").Where("name = ?", tenant)
	if tx.Dialector.Name() == "postgres" {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	} else {
		// Take SQLite's write lock now, before the count, so that a
		// second writer waits here rather than counting the same rows.
		if err := tx.Exec("UPDATE tenants SET max_webhooks = max_webhooks WHERE name = ?", tenant).Error; err != nil {
			return fmt.Errorf("lock tenant %q: %w", tenant, err)
		}
	}
	if err := q.Take(&t).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil // callers resolve the tenant before they create in it
		}
		return fmt.Errorf("read tenant %q: %w", tenant, err)
	}
	if t.MaxWebhooks <= 0 {
		return nil
	}
	var n int64
	if err := tx.Model(&models.Webhook{}).Where("tenant = ?", tenant).Count(&n).Error; err != nil {
		return fmt.Errorf("count webhooks of tenant %q: %w", tenant, err)
	}
	if n >= int64(t.MaxWebhooks) {
		return fmt.Errorf("%w: tenant %q already has %d webhooks, its max_webhooks %d; delete one, or raise the limit with homing tenant update %s --max-webhooks N",
			ErrLimit, tenant, n, t.MaxWebhooks, tenant)
	}
	return nil
}

// queueAllowed refuses queue for a webhook of tenant unless it is
// models.DefaultQueue or one of the tenant's queues (homing tenant update T
// --queues): the operator keeps each tenant to the queues its workers
// serve, and tenants' admins cannot move their webhooks onto another's, or
// onto one no worker serves (issue 35). The default tenant is the
// operator's own and chooses any queue. One read by tenants' primary key.
func queueAllowed(tx *gorm.DB, tenant, queue string) error {
	if queue == models.DefaultQueue || models.TenantOr(tenant) == models.DefaultTenant {
		return nil
	}
	var t models.Tenant
	if err := tx.Select("name", "queues").Where("name = ?", tenant).Take(&t).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil // callers resolve the tenant before they write in it
		}
		return fmt.Errorf("read the queues of tenant %q: %w", tenant, err)
	}
	if slices.Contains(t.Queues, queue) {
		return nil
	}
	allowed := append([]string{models.DefaultQueue}, t.Queues...)
	return invalid("queue", "%q is not one of tenant %q's queues (%s); an operator adds it with homing tenant update %s --queues %s",
		queue, tenant, strings.Join(allowed, ", "), tenant, strings.Join(append(slices.Clone(t.Queues), queue), ","))
}

// Update changes the given fields of webhook name.
func (s *Service) Update(ctx context.Context, tenant, name string, in Input) (models.Webhook, error) {
	w, err := s.Get(ctx, tenant, name)
	if err != nil {
		return w, err
	}
	queue := w.Queue
	if err := s.apply(&w, in); err != nil {
		return w, err
	}
	if in.URL != nil {
		if err := s.checkTarget(ctx, w.RequestURL); err != nil {
			return w, err
		}
	}
	if err := s.tryDefinition(w, in.SampleDoc); err != nil {
		return w, err
	}
	w.UpdatedAt = s.now()
	enable := in.Enabled != nil && *in.Enabled
	var exhausted int64
	if enable {
		w.DisabledReason = ""
		w.FailingSince = nil
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Only a move is checked: a form that sends the queue back as it
		// was saves, even after the operator took that queue off the list.
		if w.Queue != queue {
			if err := queueAllowed(tx, w.Tenant, w.Queue); err != nil {
				return err
			}
		}
		res := tx.Model(&models.Webhook{}).Where("id = ?", w.ID).Select("*").Omit("id", "created_at").Updates(&w)
		if res.Error != nil {
			if errors.Is(res.Error, gorm.ErrDuplicatedKey) {
				return fmt.Errorf("%w: %q (choose another name)", ErrExists, w.Name)
			}
			return fmt.Errorf("update webhook %q: %w", name, res.Error)
		}
		if enable {
			return resetHealth(tx, w)
		}
		if in.Enabled != nil && !*in.Enabled {
			exhausted, err = s.exhaustPending(tx, w, "webhook disabled")
			return err
		}
		return nil
	})
	if err == nil {
		s.exhausted(w.Tenant, w.Name, models.ReasonWebhookDisabled, exhausted)
	}
	return w, err
}

// SetEnabled enables or disables webhook name. A reason is recorded with a
// disable, and shown on the deliveries it exhausts.
func (s *Service) SetEnabled(ctx context.Context, tenant, name string, enabled bool, reason string) (models.Webhook, error) {
	w, err := s.Get(ctx, tenant, name)
	if err != nil {
		return w, err
	}
	if enabled {
		reason = ""
	}
	w.Enabled, w.DisabledReason, w.UpdatedAt = enabled, reason, s.now()
	updates := map[string]any{"enabled": enabled, "disabled_reason": reason, "updated_at": w.UpdatedAt}
	var exhausted int64
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Model(&models.Webhook{}).Where("id = ?", w.ID).Updates(updates).Error; err != nil {
			return fmt.Errorf("update webhook %q: %w", name, err)
		}
		if enabled {
			// A re-enabled endpoint starts with a clean health record.
			w.FailingSince = nil
			return resetHealth(tx, w)
		}
		why := "webhook disabled"
		if reason != "" {
			why += ": " + reason
		}
		exhausted, err = s.exhaustPending(tx, w, why)
		return err
	})
	if err == nil {
		s.exhausted(w.Tenant, w.Name, models.ReasonWebhookDisabled, exhausted)
	}
	return w, err
}

// exhaustPending makes w's pending retries (Failed rows) Exhausted with
// last_error why, in tx. A disabled or deleted webhook is sent nothing more,
// so its rows are final now rather than when they next come due, which can
// be hours away. It reports how many it exhausted, for the caller to tell
// the observer once tx is committed (exhausted).
func (s *Service) exhaustPending(tx *gorm.DB, w models.Webhook, why string) (int64, error) {
	res := tx.Model(&models.Delivery{}).Where("webhook_id = ? AND status = ?", w.ID, models.StatusFailed).
		Updates(map[string]any{"status": models.StatusExhausted, "next_retry": nil, "last_error": why, "updated_at": s.now()})
	if res.Error != nil {
		return 0, fmt.Errorf("exhaust pending deliveries of webhook %q: %w", w.Name, res.Error)
	}
	return res.RowsAffected, nil
}

// Observer is told of deliveries the service made final: n of webhook's
// pending retries Exhausted for reason (models.Reasons) by disabling or
// deleting it. dispatch.Dispatcher is one; it passes them to the process's
// metrics (homing_deliveries_total) when the process has them, and
// otherwise hands them off through Redis to a worker's (package handoff).
type Observer interface {
	Deliveries(tenant, webhook, status, reason string, n int)
}

// SetObserver sets who is told of the deliveries the service exhausts;
// nil is no one. Call it before the service is in use.
func (s *Service) SetObserver(o Observer) { s.observer = o }

// exhausted tells the observer of n deliveries of webhook exhausted for
// reason, once their transaction is committed.
func (s *Service) exhausted(tenant, webhook, reason string, n int64) {
	if s.observer != nil && n > 0 {
		s.observer.Deliveries(tenant, webhook, models.StatusExhausted, reason, int(n))
	}
}

// resetHealth clears w's health record (failing_since, failures, probe).
func resetHealth(tx *gorm.DB, w models.Webhook) error {
	if err := tx.Model(&models.WebhookHealth{}).Where("webhook_id = ?", w.ID).
		Updates(map[string]any{"failing_since": nil, "failures": 0, "probe_id": nil, "probe_at": nil}).Error; err != nil {
		return fmt.Errorf("reset health of webhook %q: %w", w.Name, err)
	}
	return nil
}

// Delete removes webhook name. Its deliveries stay for inspection; its
// pending retries become Exhausted ("webhook deleted") in the same
// transaction, since the sweep reads due rows webhook by webhook.
func (s *Service) Delete(ctx context.Context, tenant, name string) error {
	var (
		w         models.Webhook
		exhausted int64
	)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Served by webhooks_tenant_name (tenant, name).
		if err := tx.Where("tenant = ? AND name = ?", models.TenantOr(tenant), name).Take(&w).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("%w: %q", ErrNotFound, name)
			}
			return fmt.Errorf("delete webhook %q: %w", name, err)
		}
		var err error
		if exhausted, err = s.exhaustPending(tx, w, "webhook deleted"); err != nil {
			return err
		}
		res := tx.Where("id = ?", w.ID).Delete(&models.Webhook{})
		if res.Error != nil {
			return fmt.Errorf("delete webhook %q: %w", name, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		return nil
	})
	if err == nil {
		s.exhausted(w.Tenant, w.Name, models.ReasonWebhookDeleted, exhausted)
	}
	return err
}

// Get reads tenant's webhook name. Another tenant's webhook of that name is
// ErrNotFound, as if it did not exist. Served by webhooks_tenant_name.
func (s *Service) Get(ctx context.Context, tenant, name string) (models.Webhook, error) {
	var w models.Webhook
	err := s.db.WithContext(ctx).Where("tenant = ? AND name = ?", models.TenantOr(tenant), name).Take(&w).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return w, fmt.Errorf("%w: %q (see homing webhook list)", ErrNotFound, name)
	}
	if err != nil {
		return w, fmt.Errorf("read webhook %q: %w", name, err)
	}
	return w, nil
}

// List reads every webhook of tenant, by name.
func (s *Service) List(ctx context.Context, tenant string) ([]models.Webhook, error) {
	var ws []models.Webhook
	if err := s.db.WithContext(ctx).Where("tenant = ?", models.TenantOr(tenant)).Order("name").Find(&ws).Error; err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return ws, nil
}

// RotateSecret makes secret the current one and keeps the old one valid for
// grace (at most 7 days). Secrets whose grace has ended are dropped.
func (s *Service) RotateSecret(ctx context.Context, tenant, name string, secret string, grace time.Duration) (models.Webhook, error) {
	if grace < 0 || grace > MaxRotationGrace {
		return models.Webhook{}, &FieldError{Field: "grace", Message: fmt.Sprintf("grace %s must be between 0 and 168h (7 days)", grace)}
	}
	w, err := s.Get(ctx, tenant, name)
	if err != nil {
		return w, err
	}
	parsed, err := signing.ParseSecret(secret)
	if err != nil {
		return w, invalid("secret", "%v", err)
	}
	sealed, err := s.box.Seal(string(parsed))
	if err != nil {
		return w, err
	}
	now := s.now()
	kept := models.SecretList{}
	for _, p := range w.PreviousSecrets {
		if p.ExpiresAt.After(now) {
			kept = append(kept, p)
		}
	}
	if w.Secret != "" && grace > 0 {
		kept = append(models.SecretList{{Sealed: w.Secret, ExpiresAt: now.Add(grace)}}, kept...)
	}
	w.Secret, w.PreviousSecrets, w.UpdatedAt = sealed, kept, now
	if w.SignatureScheme == signing.SchemeNone {
		w.SignatureScheme = signing.SchemeBoth
	}
	if err := s.db.WithContext(ctx).Model(&models.Webhook{}).Where("id = ?", w.ID).
		Updates(map[string]any{"secret": w.Secret, "previous_secrets": w.PreviousSecrets, "signature_scheme": w.SignatureScheme, "updated_at": now}).Error; err != nil {
		return w, fmt.Errorf("rotate secret of webhook %q: %w", name, err)
	}
	s.log.Info("webhook secret rotated", "webhook", name, "grace", grace.String())
	return w, nil
}

// checkTarget refuses a URL whose host the SSRF guard would refuse.
func (s *Service) checkTarget(ctx context.Context, raw string) error {
	if s.defaults.Guard == nil {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("url", "%q is not a URL: %v", raw, err)
	}
	if err := s.defaults.Guard.CheckHost(ctx, u.Hostname()); err != nil {
		return &FieldError{Field: "url", Message: "url: " + err.Error(), Err: err}
	}
	return nil
}

func invalid(field string, format string, args ...any) error {
	return &FieldError{Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// apply validates and copies the given fields of in onto w.
func (s *Service) apply(w *models.Webhook, in Input) error {
	if in.Name != nil {
		n := strings.TrimSpace(*in.Name)
		if n == "" || len(n) > MaxNameLength || strings.IndexFunc(n, unicode.IsControl) >= 0 {
			return invalid("name", "%q must be 1 to %d printable characters", *in.Name, MaxNameLength)
		}
		if n == "." || n == ".." {
			return invalid("name", "%q cannot be used: URLs such as /v1/webhooks/%s resolve to another path; choose another name", n, n)
		}
		w.Name = n
	}
	if in.DocType != nil {
		d := strings.TrimSpace(*in.DocType)
		if d == "" || len(d) > MaxNameLength || strings.IndexFunc(d, unicode.IsControl) >= 0 {
			return invalid("doctype", "%q must be 1 to %d printable characters", *in.DocType, MaxNameLength)
		}
		w.DocType = d
	}
	if in.Event != nil {
		w.DocEvent = *in.Event
	}
	if in.Description != nil {
		d := strings.TrimSpace(*in.Description)
		if len(d) > MaxDescriptionLength || strings.IndexFunc(d, func(r rune) bool { return unicode.IsControl(r) && r != '\n' }) >= 0 {
			return invalid("description", "%d bytes: at most %d printable characters (newlines allowed); shorten it", len(d), MaxDescriptionLength)
		}
		w.Description = d
	}
	if in.Event != nil || in.DocType != nil {
		// A webhook of Homing's operational events listens to theirs.
		if events := models.EventsOf(w.DocType); !slices.Contains(events, w.DocEvent) {
			kind := "a document event"
			if w.DocType == models.OpsDocType {
				kind = "an event of " + models.OpsDocType
			}
			return invalid("event", "%q is not %s; use one of %s", w.DocEvent, kind, strings.Join(events, ", "))
		}
	}
	if in.URL != nil {
		if template.HasSyntax(*in.URL) {
			return invalid("url", "%q holds template tags, which a URL would send as they are (percent-encoded, to the wrong path); for a URL made from the document use --url-template (API url_template)", *in.URL)
		}
		if err := ValidateURL(*in.URL); err != nil {
			return err
		}
		w.RequestURL = *in.URL
	}
	if in.URLTemplate != nil {
		t := strings.TrimSpace(*in.URLTemplate)
		if t != "" {
			if err := template.ValidateURL(t); err != nil {
				return invalid("url-template", "%v", err)
			}
		}
		w.URLTemplate = t
	}
	if in.Method != nil {
		m := strings.ToUpper(strings.TrimSpace(*in.Method))
		if !slices.Contains(Methods, m) {
			return invalid("method", "%q is not one of %s", *in.Method, strings.Join(Methods, ", "))
		}
		w.RequestMethod = m
	}
	if in.Structure != nil {
		st := strings.ToLower(strings.TrimSpace(*in.Structure))
		if st != delivery.StructureJSON && st != delivery.StructureForm {
			return invalid("structure", "%q is not json or form", *in.Structure)
		}
		w.RequestStructure = st
	}
	if in.Compat != nil {
		c := strings.ToLower(strings.TrimSpace(*in.Compat))
		if c != "" && c != models.CompatFrappe {
			return invalid("compat", "%q is not \"\" or %q", *in.Compat, models.CompatFrappe)
		}
		w.Compat = c
	}
	if in.Template != nil {
		w.BodyTemplate = *in.Template
	}
	if in.Template != nil || in.Compat != nil {
		validate := template.Validate
		if w.Compat == models.CompatFrappe {
			validate = template.ValidateFrappe
		}
		if w.BodyTemplate != "" {
			if err := validate(w.BodyTemplate); err != nil {
				return invalid("template", "%v", err)
			}
		}
	}
	if w.RequestStructure == delivery.StructureForm && w.BodyTemplate != "" {
		return invalid("template", "a body template is only used with the json structure; remove it or use --structure json")
	}
	if in.Fields != nil {
		fields := models.FieldList{}
		for _, f := range *in.Fields {
			pf, err := delivery.ParseField(f)
			if err != nil {
				return invalid("field", "%v", err)
			}
			fields = append(fields, models.Field{Fieldname: pf.Fieldname, Key: pf.Key})
		}
		w.Fields = fields
	}
	if err := s.applyHeaders(w, in); err != nil {
		return err
	}
	if in.Ordering != nil {
		o := strings.ToLower(strings.TrimSpace(*in.Ordering))
		switch {
		case o != models.OrderingNone && o != models.OrderingDocument:
			return invalid("ordering", "%q is not %q or %q", *in.Ordering, models.OrderingNone, models.OrderingDocument)
		case o == models.OrderingDocument && s.db.Dialector.Name() != "postgres":
			// The ordering rule lives in PostgreSQL's statements (the
			// outbox's sequence, the batched claim and outcome).
			return invalid("ordering", "%q needs PostgreSQL (this server's database is %s); keep %q, or move Homing to PostgreSQL",
				o, s.db.Dialector.Name(), models.OrderingNone)
		}
		w.Ordering = o
	}
	if in.ConditionLanguage != nil {
		l := strings.ToLower(strings.TrimSpace(*in.ConditionLanguage))
		if l != models.ConditionExpr && l != models.ConditionPython {
			return invalid("condition-language", "%q is not expr or python", *in.ConditionLanguage)
		}
		w.ConditionLanguage = l
	}
	if in.Condition != nil {
		w.Condition = *in.Condition
	}
	if in.Condition != nil || in.ConditionLanguage != nil {
		if _, err := condition.CompileIn(w.ConditionLanguage, w.Condition); err != nil {
			return invalid("condition", "%q: %v", w.Condition, err)
		}
	}
	if in.Signature != nil {
		if err := signing.ValidScheme(*in.Signature); err != nil {
			return invalid("signature", "%v", err)
		}
		w.SignatureScheme = *in.Signature
	}
	if in.Secret != nil {
		if *in.Secret == "" {
			w.Secret, w.PreviousSecrets = "", models.SecretList{}
		} else {
			parsed, err := signing.ParseSecret(*in.Secret)
			if err != nil {
				return invalid("secret", "%v", err)
			}
			sealed, err := s.box.Seal(string(parsed))
			if err != nil {
				return &FieldError{Field: "secret", Message: "secret: " + err.Error(), Err: err}
			}
			w.Secret = sealed
		}
	}
	if in.MaxRetries != nil {
		if *in.MaxRetries < 0 || *in.MaxRetries > MaxRetriesLimit {
			return invalid("max-retries", "%d must be between 0 and %d", *in.MaxRetries, MaxRetriesLimit)
		}
		w.MaxRetries = *in.MaxRetries
	}
	if in.Timeout != nil {
		if *in.Timeout < MinTimeout || *in.Timeout > MaxTimeout {
			return invalid("timeout", "%s must be between %s and %s", *in.Timeout, MinTimeout, MaxTimeout)
		}
		w.TimeoutMS = in.Timeout.Milliseconds()
	}
	if in.Queue != nil {
		q := strings.TrimSpace(*in.Queue)
		if msg := models.CheckQueue(q); msg != "" {
			return invalid("queue", "%s", msg)
		}
		w.Queue = q
	}
	if in.Enabled != nil {
		w.Enabled = *in.Enabled
	}
	if in.RateLimit != nil {
		if *in.RateLimit < 0 || *in.RateLimit > MaxRateLimit {
			return invalid("rate-limit", "%d must be between 0 (unlimited) and %d requests a second", *in.RateLimit, MaxRateLimit)
		}
		w.RateLimit = *in.RateLimit
	}
	if in.FollowRedirects != nil {
		if *in.FollowRedirects < 0 || *in.FollowRedirects > MaxFollowRedirects {
			return invalid("follow-redirects", "%d must be between 0 (a redirect is a failure) and %d", *in.FollowRedirects, MaxFollowRedirects)
		}
		w.FollowRedirects = *in.FollowRedirects
	}
	return nil
}

// ValidateURL checks that raw is an absolute http(s) URL with a host.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("url", "%q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid("url", "%q is not http(s)", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return invalid("url", "%q has no host", raw)
	}
	if u.User != nil {
		return invalid("url", "%q carries credentials; put them in a header instead", raw)
	}
	return checkNumericHost(u.Hostname())
}

// notNow is the error of a definition evaluated for no verdict
// (budget.NoVerdict): it wraps err, and says to try again.
func notNow(name string, err error) error {
	if errors.Is(err, budget.ErrTimeLimit) {
		return fmt.Errorf("webhook %q: its definition could not be evaluated within its time limit: the server is busy, or the definition is too slow (if this persists, make it do less work); try again shortly: %w", name, err)
	}
	return fmt.Errorf("webhook %q: its definition cannot be evaluated now, try again shortly: %w", name, err)
}

// ReservedQueuePrefix starts the names of Homing's own queues
// (tasks.SystemQueue, homing_system): no webhook may use one.
const ReservedQueuePrefix = models.ReservedQueuePrefix

// tryDefinition renders w's body and evaluates its condition against the
// sample document, or an empty one. With a sample any failure refuses the
// webhook; without one only a limit does, since a missing field is the
// empty document's fault, and a body template that renders no JSON for a
// document with every field it names (delivery.CheckTemplateJSON).
func (s *Service) tryDefinition(w models.Webhook, sample map[string]any) error {
	doc := sample
	if doc == nil {
		doc = map[string]any{}
	}
	refuse := func(err error) bool {
		return sample != nil || errors.Is(err, budget.ErrLimit) || errors.Is(err, template.ErrUnknownName)
	}
	// busy is an evaluation stopped by the process's heap ceiling or by
	// its time limit (budget.NoVerdict): no verdict on the definition
	// either way, so it is neither refused nor accepted. Time is not the
	// definition's alone: a cheap one passes the limit on a loaded server.
	busy := func(err error) error { return notNow(w.Name, err) }
	cond, err := condition.CompileIn(w.ConditionLanguage, w.Condition)
	if err != nil {
		return invalid("condition", "%v", err)
	}
	with := ""
	if sample != nil {
		with = " (with the sample document)"
	}
	if _, err := cond.MatchWithin(doc, s.now(), s.defaults.ConditionTimeLimit); budget.NoVerdict(err) {
		return busy(err)
	} else if err != nil && refuse(err) {
		return invalid("condition", "%s%s", strings.TrimPrefix(err.Error(), "condition "), with)
	}
	if w.URLTemplate != "" {
		u, err := template.RenderURLWithin(w.URLTemplate, doc, w.Compat, s.now(), s.defaults.RenderTimeLimit)
		if budget.NoVerdict(err) {
			return busy(err)
		}
		if err != nil && refuse(err) {
			return invalid("url-template", "%s%s", strings.TrimPrefix(err.Error(), "url template: "), with)
		}
		if err == nil && sample != nil {
			if err := s.checkTarget(context.Background(), u); err != nil {
				return invalid("url-template", "rendered %q: %v%s", u, err, with)
			}
		}
	}
	fields := make([]delivery.Field, len(w.Fields))
	for i, f := range w.Fields {
		fields[i] = delivery.Field{Fieldname: f.Fieldname, Key: f.Key}
	}
	spec := delivery.Spec{Structure: w.RequestStructure, Template: w.BodyTemplate, Fields: fields, MaxBytes: s.defaults.MaxPayloadBytes, Compat: w.Compat, Now: s.now(), TimeLimit: s.defaults.RenderTimeLimit}
	if _, _, err := delivery.Build(spec, doc); budget.NoVerdict(err) {
		return busy(err)
	} else if err != nil && refuse(err) {
		return invalid("template", "%s%s", strings.TrimPrefix(err.Error(), "template: "), with)
	}
	if sample == nil {
		// Without a sample, a template that is not JSON for any document
		// would still end every event Exhausted.
		if err := delivery.CheckTemplateJSON(spec); budget.NoVerdict(err) {
			return busy(err)
		} else if err != nil {
			return invalid("template", "%v", err)
		}
	}
	return nil
}
