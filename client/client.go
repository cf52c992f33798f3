// Package client publishes document events to Homing from any Go service.
// Ordinary events need only Redis: Publish enqueues one asynq task carrying
// the document snapshot. workflow_transition events are delivered
// synchronously in the caller and need the database too.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/app"
	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/delivery"
	"github.com/homingdev/homing/dispatch"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/outbox"
	"github.com/homingdev/homing/retry"
	"github.com/homingdev/homing/secretbox"
	"github.com/homingdev/homing/store"
	"github.com/homingdev/homing/tasks"

	"gorm.io/gorm"
)

// ErrInvalidEvent marks an event Homing refuses; the message says what to fix.
var ErrInvalidEvent = dispatch.ErrInvalidEvent

// ErrNeedsDatabase is returned for a workflow_transition event on a client
// built without a database URL.
var ErrNeedsDatabase = errors.New("workflow_transition events are delivered synchronously and need the database: set database.url")

// SyncError is returned by Publish when a workflow_transition event could not
// be delivered to one or more webhooks; it names each of them.
type SyncError = dispatch.SyncError

// Event is one document event. ID is the caller's idempotency key: publishing
// the same ID twice never yields two deliveries to one webhook. An empty ID
// is filled with a new UUIDv7, and an empty DocName with Doc["name"] when
// that is a string (a Frappe document's name).
type Event struct {
	ID      string
	DocType string
	DocName string
	Event   string
	Doc     map[string]any
}

// Config is what a publisher needs.
type Config struct {
	// RedisURL is where the worker's queues live (redis://host:port/db).
	RedisURL string
	// RedisSentinel and RedisCluster, when set, take precedence over
	// RedisURL's host (its password, database and TLS scheme still apply),
	// as redis.sentinel.* and redis.cluster.addrs do for the workers.
	RedisSentinel config.RedisSentinel
	RedisCluster  config.RedisCluster
	// DatabaseURL is needed only to publish workflow_transition events.
	DatabaseURL string
	// SecretsKey opens webhook secrets to sign synchronous deliveries.
	SecretsKey string
	// MaxPayloadBytes refuses larger documents (default 1 MiB).
	MaxPayloadBytes int
	// Delivery holds the synchronous path's network guard settings
	// (delivery.allow_private_networks, delivery.allowed_networks); the zero
	// value refuses private and loopback receivers.
	Delivery config.Delivery
	Logger   *slog.Logger
}

// FromConfig takes a publisher's settings from Homing's configuration.
func FromConfig(c config.Config) Config {
	return Config{
		RedisURL:        c.Redis.URL,
		RedisSentinel:   c.Redis.Sentinel,
		RedisCluster:    c.Redis.Cluster,
		DatabaseURL:     c.Database.URL,
		SecretsKey:      c.Secrets.Key,
		MaxPayloadBytes: c.Delivery.MaxPayloadBytes,
		Delivery:        c.Delivery,
	}
}

// Client publishes events. It is safe for concurrent use; make one per
// process and Close it on shutdown.
type Client struct {
	cfg    Config
	queue  *asynq.Client
	db     *gorm.DB
	sender *delivery.Sender
	disp   *dispatch.Dispatcher
}

// New connects a publisher.
func New(cfg Config) (*Client, error) {
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opt, err := app.RedisConn(config.Redis{URL: cfg.RedisURL, Sentinel: cfg.RedisSentinel, Cluster: cfg.RedisCluster})
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, queue: asynq.NewClient(opt)}
	if cfg.DatabaseURL != "" {
		box, err := secretbox.New(cfg.SecretsKey)
		if err != nil {
			_ = c.queue.Close()
			return nil, err
		}
		c.db, err = store.Open(cfg.DatabaseURL)
		if err != nil {
			_ = c.queue.Close()
			return nil, err
		}
		c.sender = delivery.NewSender(app.SenderConfig(cfg.Delivery, nil))
		c.disp = dispatch.New(c.db, c.sender, box, dispatch.Config{Schedule: retry.DefaultSchedule, Logger: cfg.Logger})
	}
	return c, nil
}

// Close releases the Redis and database connections.
func (c *Client) Close() error {
	err := c.queue.Close()
	if c.db != nil {
		c.sender.Close()
		err = errors.Join(err, store.Close(c.db))
	}
	return err
}

// Publish hands ev to Homing and returns its event ID. For ordinary events it
// returns once the event is queued in Redis; a repeated ID still queued is
// accepted without a second task, and one already fanned out creates no new
// delivery. Until a worker has fanned it out, the event exists only in
// Redis: it is lost with Redis's data (a restart without persistence, a
// failover that dropped writes), and the caller must republish it. PublishTx
// and the HTTP API keep it in PostgreSQL until it is fanned out. For workflow_transition it delivers now, one attempt per
// matching webhook, and returns a *SyncError naming each webhook that
// failed.
func (c *Client) Publish(ctx context.Context, ev Event) (string, error) {
	dev, doc, err := c.prepare(ev)
	if err != nil {
		return "", err
	}
	if dev.Event == models.EventWorkflowTransition {
		if c.disp == nil {
			return dev.ID, ErrNeedsDatabase
		}
		// Give the document the shape the worker would see after decoding it
		// from Redis, so the synchronous path renders exactly what the
		// queued path would.
		if dev.Doc, err = dispatch.DecodeDoc(doc); err != nil {
			return "", fmt.Errorf("%w: %v", ErrInvalidEvent, err)
		}
		_, err := c.disp.DeliverNow(ctx, dev)
		return dev.ID, err
	}
	// The worker decodes the document from these bytes; encoding it once
	// here is all a queued event needs (and a third of Publish's time was
	// decoding and re-encoding it).
	task, err := tasks.NewEventTaskJSON(dev, doc)
	if err != nil {
		return "", err
	}
	if _, err := c.queue.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return dev.ID, fmt.Errorf("queue event %s in Redis: %w", dev.ID, err)
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
	dev, _, err := prepare(ev, maxPayloadBytes)
	if err != nil {
		return "", err
	}
	if dev.Event == models.EventWorkflowTransition {
		return dev.ID, ErrSyncInTx
	}
	if _, err := outbox.Add(ctx, tx, dev, time.Now()); err != nil {
		return dev.ID, err
	}
	return dev.ID, nil
}

// prepare fills the ID, checks the event and the document's size, and
// returns the document encoded as JSON, the form a queued event carries.
func (c *Client) prepare(ev Event) (dispatch.Event, []byte, error) {
	return prepare(ev, c.cfg.MaxPayloadBytes)
}

func prepare(ev Event, maxPayloadBytes int) (dispatch.Event, []byte, error) {
	if ev.Doc == nil {
		return dispatch.Event{}, nil, &dispatch.FieldError{Field: "doc", Message: "doc is missing (give the document as a JSON object)"}
	}
	b, err := json.Marshal(ev.Doc)
	if err != nil {
		return dispatch.Event{}, nil, &dispatch.FieldError{Field: "doc", Message: fmt.Sprintf("doc cannot be encoded as JSON: %v", err)}
	}
	dev, err := dispatch.PrepareEncoded(dispatch.Event{ID: ev.ID, DocType: ev.DocType, DocName: ev.DocName, Event: ev.Event, Doc: ev.Doc}, b, maxPayloadBytes)
	return dev, b, err
}
