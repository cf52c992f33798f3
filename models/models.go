// Package models holds Homing's GORM models and nothing else. Queries live in
// the packages that run them; the schema itself is owned by the versioned SQL
// migrations in package store.
package models

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Delivery statuses. Failed always means another attempt is scheduled
// (next_retry is set); anything that will never be tried again is Exhausted.
const (
	StatusDelivered = "Delivered"
	StatusFailed    = "Failed"
	StatusExhausted = "Exhausted"
)

// Reasons a delivery reached its status, as homing_deliveries_total's
// reason label counts them: a short, fixed list, so that the label stays
// bounded.
const (
	ReasonAccepted        = "accepted"         // Delivered: the receiver answered 2xx
	ReasonRetrying        = "retrying"         // Failed: another attempt is scheduled
	ReasonRetriesSpent    = "retries_spent"    // Exhausted: the last attempt of the budget failed
	ReasonGone            = "gone"             // Exhausted: 410 Gone disabled the webhook
	ReasonUnhealthy       = "unhealthy"        // Exhausted: health.disable_after disabled the webhook
	ReasonSynchronous     = "synchronous"      // Exhausted: workflow_transition's one attempt failed
	ReasonUnbuildable     = "unbuildable"      // Exhausted: the request could not be built (or had no payload)
	ReasonWebhookDisabled = "webhook_disabled" // Exhausted: its webhook was disabled
	ReasonWebhookDeleted  = "webhook_deleted"  // Exhausted: its webhook was deleted
	ReasonTenantDisabled  = "tenant_disabled"  // Exhausted: its tenant was disabled
)

// Reasons lists every reason by the status it goes with.
var Reasons = map[string][]string{
	StatusDelivered: {ReasonAccepted},
	StatusFailed:    {ReasonRetrying},
	StatusExhausted: {ReasonRetriesSpent, ReasonGone, ReasonUnhealthy, ReasonSynchronous, ReasonUnbuildable, ReasonWebhookDisabled, ReasonWebhookDeleted, ReasonTenantDisabled},
}

// Document events a webhook can listen to: Frappe's document events.
var DocEvents = []string{
	"after_insert", "on_update", "on_submit", "on_cancel", "on_trash",
	"on_update_after_submit", "on_change", "workflow_transition",
}

// OpsDocType is the doctype of Homing's own operational events (package
// opsevent), and OpsEvents are their events. Producers cannot publish it;
// webhooks subscribe to it like to any doctype.
const OpsDocType = "Homing Webhook"

// OpsEvents are the events of OpsDocType.
var OpsEvents = []string{"failing", "recovered", "disabled", "exhausted"}

// EventsOf is the events a webhook of doctype may listen to: OpsEvents for
// OpsDocType, DocEvents for any other.
func EventsOf(doctype string) []string {
	if doctype == OpsDocType {
		return OpsEvents
	}
	return DocEvents
}

// EventWorkflowTransition is the one event that refuses to be deferred: it is
// delivered synchronously in the publisher and never retried.
const EventWorkflowTransition = "workflow_transition"

// Webhook is an operator's subscription: which documents, under which
// condition, go where and in which shape.
type Webhook struct {
	ID               string     `gorm:"column:id;primaryKey"`
	Tenant           string     `gorm:"column:tenant;default:default"`
	Name             string     `gorm:"column:name"`
	DocType          string     `gorm:"column:doc_type"`
	DocEvent         string     `gorm:"column:doc_event"`
	Condition        string     `gorm:"column:condition"`
	RequestURL       string     `gorm:"column:request_url"`
	RequestMethod    string     `gorm:"column:request_method"`
	RequestStructure string     `gorm:"column:request_structure"`
	BodyTemplate     string     `gorm:"column:body_template"`
	Fields           FieldList  `gorm:"column:fields"`
	Headers          StringMap  `gorm:"column:headers"`
	Secret           string     `gorm:"column:secret"`           // sealed with secretbox; never the plain secret
	PreviousSecrets  SecretList `gorm:"column:previous_secrets"` // sealed secrets still valid during a rotation
	SignatureScheme  string     `gorm:"column:signature_scheme"`
	Enabled          bool       `gorm:"column:enabled"`
	DisabledReason   string     `gorm:"column:disabled_reason"`
	// FailingSince is read from webhook_health by the attempt's claim
	// (WebhookHealth), not stored on the webhook.
	FailingSince *time.Time `gorm:"-"`
	// RateLimit is the most requests per second sent to this webhook by
	// all workers together; 0 is unlimited.
	RateLimit  int    `gorm:"column:rate_limit"`
	MaxRetries int    `gorm:"column:max_retries"`
	Queue      string `gorm:"column:queue"`
	TimeoutMS  int64  `gorm:"column:timeout_ms"`
	// FollowRedirects is how many redirects an attempt follows; 0 makes
	// every 3xx a failure.
	FollowRedirects int `gorm:"column:follow_redirects"`
	// URLTemplate, when not empty, is rendered with the document per event
	// and replaces RequestURL (Frappe's is_dynamic_url).
	URLTemplate string `gorm:"column:url_template"`
	// Compat is "" (Homing's own bodies) or CompatFrappe.
	Compat string `gorm:"column:compat"`
	// ConditionLanguage is ConditionExpr or ConditionPython.
	ConditionLanguage string `gorm:"column:condition_language"`
	// Ordering is OrderingNone or OrderingDocument: with OrderingDocument
	// the deliveries of one document (tenant, webhook, doc_type, doc_name)
	// are sent in the order their events were accepted, each only once the
	// one before it is final.
	Ordering string `gorm:"column:ordering;default:none"`
	// Description is the webhook in its owner's words; nothing reads it
	// to deliver.
	Description string    `gorm:"column:description"`
	CreatedAt   time.Time `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt   time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// Webhook orderings (Webhook.Ordering).
const (
	OrderingNone     = "none"
	OrderingDocument = "document"
)

// Ordered reports whether w sends each document's deliveries in order.
func (w Webhook) Ordered() bool { return w.Ordering == OrderingDocument }

// Webhook compatibility modes and condition languages.
const (
	CompatFrappe    = "frappe"
	ConditionExpr   = "expr"
	ConditionPython = "python"
)

// TableName pins the table name the migrations create.
func (Webhook) TableName() string { return "webhooks" }

// Timeout is the whole-request timeout of one attempt.
func (w Webhook) Timeout() time.Duration { return time.Duration(w.TimeoutMS) * time.Millisecond }

// WebhookHealth is an endpoint's health, kept off the webhooks row so that
// its frequent changes neither move webhooks_version (emptying every
// worker's webhook cache) nor queue on the webhook's row.
type WebhookHealth struct {
	WebhookID string `gorm:"column:webhook_id;primaryKey"`
	// FailingSince is the first failure since the last success; nil while
	// healthy.
	FailingSince *time.Time `gorm:"column:failing_since"`
	// Failures counts failed attempts since the last success.
	Failures int `gorm:"column:failures"`
	// ProbeID is, while the webhook is failing, the one delivery whose
	// retry may be sent; ProbeAt is when it was chosen.
	ProbeID *string    `gorm:"column:probe_id"`
	ProbeAt *time.Time `gorm:"column:probe_at"`
	// AnnouncedSince is the FailingSince of the episode a `failing`
	// operational event announced, until its `recovered` event is
	// published (package opsevent); nil when none is announced.
	AnnouncedSince *time.Time `gorm:"column:announced_since"`
}

// TableName pins the table name the migrations create.
func (WebhookHealth) TableName() string { return "webhook_health" }

// FailingAfter is how many failed attempts in a row, with no success since,
// make a webhook failing: its retries then go out one probe at a time
// (sweeper), and the first success releases the rest. A few, not one, so
// that a receiver failing now and then is not slowed down.
const FailingAfter = 5

// Failing reports whether the webhook is failing: its retries are held
// back behind one probe.
func (h WebhookHealth) Failing() bool { return h.Failures >= FailingAfter }

// The health states, named alike in every view (webhook show, homing
// stats, the API, the console, the portal) and by the operational events.
const (
	// HealthHealthy: no failure since the last success.
	HealthHealthy = "healthy"
	// HealthDegraded: failures since the last success, fewer than
	// FailingAfter; retries still go out as they come due.
	HealthDegraded = "degraded"
	// HealthFailing: FailingAfter failures or more since the last success;
	// due retries are held back behind one probe at a time, and the first
	// success releases them (the `failing` operational event).
	HealthFailing = "failing"
)

// State is the webhook's health state: HealthHealthy, HealthDegraded or
// HealthFailing.
func (h WebhookHealth) State() string {
	switch {
	case h.Failing():
		return HealthFailing
	case h.Failures > 0 || h.FailingSince != nil:
		return HealthDegraded
	}
	return HealthHealthy
}

// HealthDisabled is the state of a webhook that is disabled, whatever its
// health.
const HealthDisabled = "disabled"

// StateOf is the state of a webhook enabled or not whose health is h:
// HealthDisabled, or h.State().
func (h WebhookHealth) StateOf(enabled bool) string {
	if !enabled {
		return HealthDisabled
	}
	return h.State()
}

// Delivery is one event for one webhook (Frappe's Webhook Request Log turned
// into a delivery record): it carries its own state and the frozen request.
type Delivery struct {
	ID          string `gorm:"column:id;primaryKey"`
	Tenant      string `gorm:"column:tenant;default:default"`
	WebhookID   string `gorm:"column:webhook_id"`
	WebhookName string `gorm:"column:webhook_name"`
	EventID     string `gorm:"column:event_id"`
	DocType     string `gorm:"column:doc_type"`
	DocName     string `gorm:"column:doc_name"`
	DocEvent    string `gorm:"column:doc_event"`
	// AcceptedAt is when its event was accepted (event.AcceptedHeader);
	// nil when not known, when CreatedAt is the nearest.
	AcceptedAt *time.Time `gorm:"column:accepted_at"`
	Method     string     `gorm:"column:method"`
	URL        string     `gorm:"column:url"`
	// URLDoc is the document the delivery was made from, kept for a
	// webhook with a url_template (each retry renders the webhook's
	// current template with it) and for a delivery whose request could not
	// be built (a retry or resend builds it with the webhook's current
	// definition, recovery). Nil otherwise.
	URLDoc         *string    `gorm:"column:url_doc"`
	Headers        StringMap  `gorm:"column:headers"`
	Payload        []byte     `gorm:"column:payload"`
	Status         string     `gorm:"column:status"`
	Attempts       int        `gorm:"column:attempts"`
	MaxRetries     int        `gorm:"column:max_retries"`
	NextRetry      *time.Time `gorm:"column:next_retry"`
	LastStatusCode *int       `gorm:"column:last_status_code"`
	LastError      string     `gorm:"column:last_error"`
	LastResponse   string     `gorm:"column:last_response"`
	ResentFrom     *string    `gorm:"column:resent_from"`
	// QueuedAt is when a sweep queued this row's retry task (cleared by
	// the claim), so the sweep's next step does not read it again.
	QueuedAt  *time.Time `gorm:"column:queued_at"`
	CreatedAt time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt time.Time  `gorm:"column:updated_at;autoUpdateTime:false"`
	// TraceContext is the trace context of the fan-out that made the
	// delivery, "<traceparent>[ <tracestate>]" (package tracing): every
	// attempt, retries hours later included, is a span of that trace. Nil
	// when the event came with none.
	TraceContext *string `gorm:"column:trace_context"`
	// AcceptSeq is the delivery's place among its document's deliveries
	// to an ordered webhook (Webhook.Ordering): its event's outbox_events
	// id, or a value of the same sequence drawn at fan-out. Nil for an
	// unordered webhook's delivery.
	AcceptSeq *int64 `gorm:"column:accept_seq"`
}

// TableName pins the table name the migrations create.
func (Delivery) TableName() string { return "deliveries" }

// Attempt is one try of a delivery: what was sent where, and what came back.
type Attempt struct {
	ID             int64     `gorm:"column:id;primaryKey;autoIncrement"`
	DeliveryID     string    `gorm:"column:delivery_id"`
	Tenant         string    `gorm:"column:tenant;default:default"`
	Attempt        int       `gorm:"column:attempt"`
	At             time.Time `gorm:"column:at"`
	Method         string    `gorm:"column:method"`
	URL            string    `gorm:"column:url"`
	RequestHeaders StringMap `gorm:"column:request_headers"`
	StatusCode     *int      `gorm:"column:status_code"`
	DurationMS     int64     `gorm:"column:duration_ms"`
	Class          string    `gorm:"column:class"`
	Error          string    `gorm:"column:error"`
	Response       string    `gorm:"column:response"`
}

// TableName pins the table name the migrations create.
func (Attempt) TableName() string { return "delivery_attempts" }

// Field maps a document field to a key of the request body.
type Field struct {
	Fieldname string `json:"fieldname"`
	Key       string `json:"key"`
}

// FieldList is stored as a JSON array.
type FieldList []Field

// Value implements driver.Valuer.
func (f FieldList) Value() (driver.Value, error) { return jsonValue(f, "[]") }

// Scan implements sql.Scanner.
func (f *FieldList) Scan(src any) error { return jsonScan(src, f) }

// StringMap is a JSON object of strings (headers).
type StringMap map[string]string

// Value implements driver.Valuer.
func (m StringMap) Value() (driver.Value, error) { return jsonValue(m, "{}") }

// Scan implements sql.Scanner.
func (m *StringMap) Scan(src any) error { return jsonScan(src, m) }

// SealedSecret is a secret kept valid until ExpiresAt during a rotation.
type SealedSecret struct {
	Sealed    string    `json:"sealed"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SecretList is stored as a JSON array.
type SecretList []SealedSecret

// Value implements driver.Valuer.
func (s SecretList) Value() (driver.Value, error) { return jsonValue(s, "[]") }

// Scan implements sql.Scanner.
func (s *SecretList) Scan(src any) error { return jsonScan(src, s) }

func jsonValue(v any, empty string) (driver.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode json column: %w", err)
	}
	if string(b) == "null" {
		return empty, nil
	}
	return string(b), nil
}

func jsonScan(src any, dst any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("decode json column: unexpected type %T", src)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("decode json column: %w", err)
	}
	return nil
}

// OutboxEvent is an event committed by a producer's transaction and not yet
// fanned out by a worker: the record that it was accepted, kept until its
// deliveries are committed, so that it survives the loss of Redis's data.
type OutboxEvent struct {
	ID        int64     `gorm:"column:id;primaryKey;autoIncrement"`
	EventID   string    `gorm:"column:event_id"`
	Tenant    string    `gorm:"column:tenant;default:default"`
	Payload   string    `gorm:"column:payload"` // the webhook:event task payload (JSON)
	CreatedAt time.Time `gorm:"column:created_at;autoCreateTime:false"`
	// QueuedAt is when the relay last put the event's task into Redis; nil
	// while it has not (or a republish asked for it again).
	QueuedAt *time.Time `gorm:"column:queued_at"`
	// TraceContext is the W3C trace context the event was published in
	// (package tracing's Context); nil when it came with none.
	TraceContext *string `gorm:"column:trace_context"`
	// DocType, DocName and DocEvent name the event's document: until it is
	// fanned out, the row holds the ordered deliveries of that document
	// accepted after it. Nil on rows written before migration 0031.
	DocType  *string `gorm:"column:doc_type"`
	DocName  *string `gorm:"column:doc_name"`
	DocEvent *string `gorm:"column:doc_event"`
}

// TableName pins the table name the migrations create.
func (OutboxEvent) TableName() string { return "outbox_events" }

// PublishedType is a doctype × event pair a tenant has published (its
// first event's fan-out wrote it): the portal's event list offers it.
type PublishedType struct {
	Tenant    string    `gorm:"column:tenant;primaryKey"`
	DocType   string    `gorm:"column:doc_type;primaryKey"`
	Event     string    `gorm:"column:event;primaryKey"`
	FirstSeen time.Time `gorm:"column:first_seen"`
}

// TableName pins the table name the migrations create.
func (PublishedType) TableName() string { return "event_types" }

// PublishedEvent records that an event ID was accepted through the outbox,
// so a repeat is recognised after the outbox row itself is gone.
type PublishedEvent struct {
	Tenant    string    `gorm:"column:tenant;primaryKey;default:default"`
	EventID   string    `gorm:"column:event_id;primaryKey"`
	CreatedAt time.Time `gorm:"column:created_at;autoCreateTime:false"`
	// BodyHash is the SHA-256 (hex) of the event POST /v1/events accepted;
	// "" when not recorded (client.PublishTx, or keys older than it).
	BodyHash string `gorm:"column:body_hash"`
	// AcceptID is random to the homing serve write that recorded the ID
	// (outbox.Writer), so that a write repeated after an ambiguous commit
	// knows its own record; "" when none.
	AcceptID string `gorm:"column:accept_id"`
}

// TableName pins the table name the migrations create.
func (PublishedEvent) TableName() string { return "published_events" }

// APIToken is a bearer token of the HTTP API. Only the SHA-256 of the token
// is stored; the token itself is shown once, when it is created.
type APIToken struct {
	ID    string `gorm:"column:id;primaryKey"`
	Name  string `gorm:"column:name"`
	Scope string `gorm:"column:scope"` // publish or admin
	// Tenant is the tenant the token acts in; an Operator token acts in
	// Tenant (always DefaultTenant) unless its request names another.
	Tenant     string     `gorm:"column:tenant;default:default"`
	Operator   bool       `gorm:"column:operator"`
	TokenHash  string     `gorm:"column:token_hash"`
	CreatedAt  time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	LastUsedAt *time.Time `gorm:"column:last_used_at"`
}

// TableName pins the table name the migrations create.
func (APIToken) TableName() string { return "api_tokens" }

// DefaultTenant is the tenant every install has, and the one a row, an event
// or a request belongs to when it names none.
const DefaultTenant = "default"

// Tenant is one site or customer served by this Homing (issue 26). Its Name
// is its key in every other table and never changes.
type Tenant struct {
	Name    string `gorm:"column:name;primaryKey"`
	Enabled bool   `gorm:"column:enabled"`
	// PortalOrigins, MaxWebhooks, PublishRate and ActionRate are settings for the
	// portal and the per-tenant limits; zero values mean unset.
	PortalOrigins StringList `gorm:"column:portal_origins"`
	MaxWebhooks   int        `gorm:"column:max_webhooks"`
	PublishRate   int        `gorm:"column:publish_rate"`
	// Queues are the asynq queues the tenant's webhooks may be put on
	// besides DefaultQueue, as the operator lists them (issue 35): a
	// tenant's own admins and portal users choose from these only.
	Queues     StringList `gorm:"column:queues"`
	ActionRate int        `gorm:"column:action_rate"`
	// PortalAdvanced shows the operator's webhook settings (queue,
	// compatibility, condition language, URL template, redirects,
	// signature scheme) in the tenant's portal; off, its form keeps them.
	PortalAdvanced bool `gorm:"column:portal_advanced"`
	// EventTypes are "Doctype:event" pairs the operator declares the
	// tenant publishes, offered in the portal's event list.
	EventTypes StringList `gorm:"column:event_types"`
	// ProductName, LogoURL, AccentColor and SupportURL are the tenant's
	// theme (issue 38): what its portal shows instead of Homing; empty is
	// unset.
	ProductName string    `gorm:"column:product_name"`
	LogoURL     string    `gorm:"column:logo_url"`
	AccentColor string    `gorm:"column:accent_color"`
	SupportURL  string    `gorm:"column:support_url"`
	CreatedAt   time.Time `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt   time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

func (Tenant) TableName() string { return "tenants" }

// StringList is a JSON array of strings in a text column.
type StringList []string

func (l StringList) Value() (driver.Value, error) { return jsonValue(l, "[]") }

func (l *StringList) Scan(src any) error { return jsonScan(src, l) }

// TenantOr is tenant, or DefaultTenant when it is empty: what an event, a
// task or a request that names no tenant belongs to.
func TenantOr(tenant string) string {
	if tenant == "" {
		return DefaultTenant
	}
	return tenant
}

// PortalLink is a link into a tenant's portal (portal.Links): its signed
// token names this row, which revoking marks.
type PortalLink struct {
	ID        string `gorm:"column:id;primaryKey"`
	Tenant    string `gorm:"column:tenant"`
	CreatedBy string `gorm:"column:created_by"`
	// TokenID is the token that made the link (NULL: none); deleting the
	// token deletes the link (ON DELETE CASCADE), which revokes it.
	TokenID   *string    `gorm:"column:token_id"`
	CreatedAt time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	ExpiresAt time.Time  `gorm:"column:expires_at"`
	RevokedAt *time.Time `gorm:"column:revoked_at"`
}

// TableName pins the table name the migrations create.
func (PortalLink) TableName() string { return "portal_links" }

// ActivityHour is one closed hour's counts of one tenant's webhook, kept by
// the console's rollup (inspect.rollHours) so that a 24-hour page reads 24
// rows instead of the day's deliveries and attempts.
type ActivityHour struct {
	Tenant  string    `gorm:"column:tenant;primaryKey"`
	Webhook string    `gorm:"column:webhook_name;primaryKey"`
	Hour    time.Time `gorm:"column:hour;primaryKey"`
	// Deliveries counts the deliveries created in the hour; Attempts the
	// attempts made in it, Succeeded those answered 2xx and Failed the
	// others.
	Deliveries int64 `gorm:"column:deliveries"`
	Attempts   int64 `gorm:"column:attempts"`
	Succeeded  int64 `gorm:"column:succeeded"`
	Failed     int64 `gorm:"column:failed"`
}

// TableName pins the table name the migrations create.
func (ActivityHour) TableName() string { return "activity_rollup" }

// RolledHour says that an hour's ActivityHour rows are complete.
type RolledHour struct {
	Hour     time.Time `gorm:"column:hour;primaryKey"`
	RolledAt time.Time `gorm:"column:rolled_at"`
}

// TableName pins the table name the migrations create.
func (RolledHour) TableName() string { return "activity_rollup_hours" }

// DefaultQueue is the asynq queue a webhook's deliveries go to unless it
// names another; every tenant may use it.
const DefaultQueue = "default"

// ReservedQueuePrefix starts the names of Homing's own queues
// (tasks.SystemQueue, homing_system): no webhook may use one.
const ReservedQueuePrefix = "homing_"

// CheckQueue says what is wrong with q as the name of a webhook's queue, or
// "" when nothing is.
func CheckQueue(q string) string {
	if q == "" || len(q) > 100 || strings.ContainsFunc(q, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return fmt.Sprintf("%q must be a non-empty name of at most 100 characters without spaces", q)
	}
	if strings.HasPrefix(q, ReservedQueuePrefix) {
		return fmt.Sprintf("%q is reserved for Homing's own tasks (names starting with %q): a webhook there would hold up the sweeps and retention; choose another name", q, ReservedQueuePrefix)
	}
	return ""
}
