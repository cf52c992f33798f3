// Package client publishes document events to Homing from any Go service.
// Ordinary events need only Redis: Publish enqueues one asynq task carrying
// the document snapshot; PublishTx writes it into Homing's outbox inside the
// caller's own transaction. workflow_transition events are delivered
// synchronously, which needs Homing's engine: give Config.Transitions either
// ViaServe (through homing serve's HTTP API; this package stays small) or
// transition.New (the engine in this process).
//
// The package imports asynq, go-redis and GORM (for PublishTx's *gorm.DB)
// and nothing of the engine: client_deps_test.go holds the list.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/outbox"
	"github.com/homingdev/homing/internal/intake/redisconn"
	"github.com/homingdev/homing/internal/lib/tracing"
	"github.com/homingdev/homing/models"

	"gorm.io/gorm"
)

// ErrInvalidEvent marks an event Homing refuses; the message says what to fix.
var ErrInvalidEvent = event.ErrInvalidEvent

// ErrNeedsTransitions is returned for a workflow_transition event on a
// client built without Config.Transitions.
var ErrNeedsTransitions = errors.New("workflow_transition events are delivered synchronously by Homing's engine: set client.Config.Transitions to client.ViaServe{…} (through homing serve) or transition.New(…) (the engine in this process)")

// SyncError is returned by Publish when a workflow_transition event could not
// be delivered to one or more webhooks; it names each of them.
type SyncError = event.SyncError

// Event is one document event. ID is the caller's idempotency key: publishing
// the same ID twice never yields two deliveries to one webhook. An empty ID
// is filled with a new UUIDv7, and an empty DocName with Doc["name"] when
// that is a string (a Frappe document's name).
type Event struct {
	// Tenant is the tenant the event belongs to ("" is the default one):
	// only its webhooks match it, and its ID is unique within it.
	Tenant  string
	ID      string
	DocType string
	DocName string
	Event   string
	Doc     map[string]any
}

// Transitions delivers workflow_transition events now, one attempt per
// matching webhook, and returns a *SyncError naming each webhook that
// failed: ViaServe, or *transition.Deliverer.
type Transitions interface {
	DeliverNow(ctx context.Context, ev event.Event) error
}

// Config is what a publisher needs.
type Config struct {
	// RedisURL is where the worker's queues live (redis://host:port/db).
	RedisURL string
	// RedisSentinelMaster with RedisSentinelAddrs, or RedisClusterAddrs,
	// take precedence over RedisURL's host (its password, database and TLS
	// scheme still apply), as redis.sentinel.* and redis.cluster.addrs do
	// for the workers.
	RedisSentinelMaster string
	RedisSentinelAddrs  []string
	RedisClusterAddrs   []string
	// MaxPayloadBytes refuses larger documents (default 1 MiB).
	MaxPayloadBytes int
	// Transitions delivers workflow_transition events; without it they are
	// refused with ErrNeedsTransitions.
	Transitions Transitions
	Logger      *slog.Logger
}

// Client publishes events. It is safe for concurrent use; make one per
// process and Close it on shutdown.
type Client struct {
	cfg   Config
	queue *asynq.Client
}

// New connects a publisher.
func New(cfg Config) (*Client, error) {
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opt, err := redisconn.Settings{URL: cfg.RedisURL, SentinelMaster: cfg.RedisSentinelMaster, SentinelAddrs: cfg.RedisSentinelAddrs, ClusterAddrs: cfg.RedisClusterAddrs}.Opt()
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, queue: asynq.NewClient(opt)}, nil
}

// Close releases the Redis connections. It does not close Config.Transitions.
func (c *Client) Close() error {
	return c.queue.Close()
}

// Publish hands ev to Homing and returns its event ID. When ctx carries a
// span (the caller's OpenTelemetry SDK), Publish is a span of that trace
// (homing.publish) and the event carries its W3C trace context to every
// attempt of its deliveries (README, "Tracing"). For ordinary events it
// returns once the event is queued in Redis; a repeated ID still queued is
// accepted without a second task, and one already fanned out creates no new
// delivery. Until a worker has fanned it out, the event exists only in
// Redis: it is lost with Redis's data (a restart without persistence, a
// failover that dropped writes), and the caller must republish it. PublishTx
// and the HTTP API keep it in PostgreSQL until it is fanned out. For workflow_transition it delivers now, one attempt per
// matching webhook, and returns a *SyncError naming each webhook that
// failed.
//
// An error that IsRetryable reports (Redis or homing serve away, serve's
// 503 during a database failover, with RetryAfter) is worth repeating
// with the same event ID, which is never delivered twice.
func (c *Client) Publish(ctx context.Context, ev Event) (string, error) {
	ctx, span := tracing.StartChild(ctx, "homing.publish", trace.SpanKindProducer)
	defer span.End()
	dev, doc, err := c.prepare(ev)
	if err != nil {
		return "", err
	}
	dev.TraceContext = tracing.Of(ctx)
	if dev.Event == models.EventWorkflowTransition {
		if c.cfg.Transitions == nil {
			return dev.ID, ErrNeedsTransitions
		}
		// Give the document the shape the worker would see after decoding it
		// from Redis, so the synchronous path renders exactly what the
		// queued path would.
		if dev.Doc, err = event.DecodeDoc(doc); err != nil {
			return "", fmt.Errorf("%w: %v", ErrInvalidEvent, err)
		}
		return dev.ID, c.cfg.Transitions.DeliverNow(ctx, dev)
	}
	// The worker decodes the document from these bytes; encoding it once
	// here is all a queued event needs (and a third of Publish's time was
	// decoding and re-encoding it).
	task, err := event.NewTaskJSON(dev, doc)
	if err != nil {
		return "", err
	}
	if _, err := c.queue.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// go-redis answers a server that is down with the caller's
			// deadline once its dials have used it up: say what that means.
			// asynq keeps only the text of its scripts' errors ("redis eval
			// error: context deadline exceeded"), so ctx is asked too.
			err = fmt.Errorf("unreachable, no answer before the deadline (is redis.addr right, and the server up?): %w", err)
		}
		return dev.ID, transportError(fmt.Errorf("queue event %s in Redis: %w", dev.ID, err))
	}
	return dev.ID, nil
}

// DefaultMaxPayloadBytes is the largest document a publisher accepts when
// its configuration names no limit.
const DefaultMaxPayloadBytes = 1 << 20

// ErrSyncInTx is returned by PublishTx for a workflow_transition event: it
// is delivered synchronously, and a delivery cannot wait for a commit.
var ErrSyncInTx = errors.New("workflow_transition events are delivered synchronously and cannot wait for a commit: call Publish (outside the transaction, or before committing) and roll back on its error")

// PublishTx writes ev into Homing's transactional outbox inside tx, the
// caller's own transaction on Homing's database: the event exists if and
// only if tx commits, so a business write and its event can never part. The
// relay (in the scheduler, in homing serve, and once at every worker start)
// queues committed events within milliseconds (PostgreSQL NOTIFY) or one
// outbox.poll_interval at worst, and the event stays in the outbox until a
// worker has fanned it out, so it survives the loss of Redis's data. It
// returns the event ID (a new UUIDv7 when ev.ID is empty); publishing an ID
// the outbox has seen before writes nothing and still returns the ID (and
// queues the event again if it was not fanned out yet).
//
// tx must be on the database named by Homing's database.url, migrated
// (homing migrate). workflow_transition events are refused with
// ErrSyncInTx.
//
// An error fails the caller's transaction with it (PostgreSQL refuses
// every statement after one that failed): roll back. When IsRetryable
// reports it (the database was away, read-only after a failover, or the
// transaction lost to a concurrent one), run the whole transaction again.
func PublishTx(ctx context.Context, tx *gorm.DB, ev Event) (string, error) {
	return publishTx(ctx, tx, ev, DefaultMaxPayloadBytes)
}

// PublishTx is the package's PublishTx with this client's
// delivery.max_payload_bytes.
func (c *Client) PublishTx(ctx context.Context, tx *gorm.DB, ev Event) (string, error) {
	return publishTx(ctx, tx, ev, c.cfg.MaxPayloadBytes)
}

func publishTx(ctx context.Context, tx *gorm.DB, ev Event, maxPayloadBytes int) (string, error) {
	if tx == nil {
		return "", errors.New("PublishTx: tx is nil (pass the *gorm.DB of your open transaction)")
	}
	ctx, span := tracing.StartChild(ctx, "homing.publish", trace.SpanKindProducer)
	defer span.End()
	dev, _, err := prepare(ev, maxPayloadBytes)
	if err != nil {
		return "", err
	}
	if dev.Event == models.EventWorkflowTransition {
		return dev.ID, ErrSyncInTx
	}
	dev.TraceContext = tracing.Of(ctx)
	if _, err := outbox.Add(ctx, tx, dev, time.Now()); err != nil {
		return dev.ID, databaseError(err)
	}
	return dev.ID, nil
}

// prepare fills the ID, checks the event and the document's size, and
// returns the document encoded as JSON, the form a queued event carries.
func (c *Client) prepare(ev Event) (event.Event, []byte, error) {
	return prepare(ev, c.cfg.MaxPayloadBytes)
}

func prepare(ev Event, maxPayloadBytes int) (event.Event, []byte, error) {
	if ev.Doc == nil {
		return event.Event{}, nil, &event.FieldError{Field: "doc", Message: "doc is missing (give the document as a JSON object)"}
	}
	b, err := json.Marshal(ev.Doc)
	if err != nil {
		return event.Event{}, nil, &event.FieldError{Field: "doc", Message: fmt.Sprintf("doc cannot be encoded as JSON: %v", err)}
	}
	dev, err := event.PrepareEncoded(event.Event{Tenant: tenantField(ev.Tenant), ID: ev.ID, DocType: ev.DocType, DocName: ev.DocName, Event: ev.Event, Doc: ev.Doc}, b, maxPayloadBytes)
	return dev, b, err
}

// tenantField is how an event names its tenant: empty for the default one,
// as events did before tenants.
func tenantField(name string) string {
	if name == models.DefaultTenant {
		return ""
	}
	return name
}
