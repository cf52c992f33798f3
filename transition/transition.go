// Package transition delivers workflow_transition events synchronously, in
// the publishing process, for a Go service that publishes with package
// client. A transition is told now whether its receivers took it, so it
// cannot wait in a queue: it needs Homing's engine (the database, the
// webhooks' secrets, the sender), which package client deliberately does not
// import. A service that links this package gets the engine; one that would
// rather stay small sends its transitions through homing serve with
// client.ViaServe.
package transition

import (
	"context"
	"errors"
	"log/slog"

	"github.com/homingdev/homing/config"
	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/engine/dispatch"
	"github.com/homingdev/homing/internal/engine/secretbox"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/intake/store"
	"github.com/homingdev/homing/internal/ops/handoff"
	"github.com/homingdev/homing/internal/wiring/app"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Config is what the synchronous path needs.
type Config struct {
	// DatabaseURL is Homing's database.url.
	DatabaseURL string
	// SecretsKey (secrets.key) opens webhook secrets to sign deliveries.
	SecretsKey string
	// Delivery holds the network guard settings (delivery.allow_private_networks,
	// delivery.allowed_networks); the zero value refuses private and
	// loopback receivers.
	Delivery config.Delivery
	// Redis is Homing's redis settings: the outcomes of the deliveries made
	// here are handed off through it to the workers' metrics
	// (homing_deliveries_total, package handoff). Without a redis.url (or
	// Sentinel or Cluster addresses) they cannot be, and each one is
	// logged at ERROR as not counted.
	Redis  config.Redis
	Logger *slog.Logger
}

// FromConfig takes the synchronous path's settings from Homing's
// configuration.
func FromConfig(c config.Config) Config {
	return Config{DatabaseURL: c.Database.URL, SecretsKey: c.Secrets.Key, Delivery: c.Delivery, Redis: c.Redis}
}

// Deliverer delivers workflow_transition events now; it satisfies
// client.Transitions. Make one per process and Close it on shutdown.
type Deliverer struct {
	db     *gorm.DB
	sender *send.Sender
	disp   *dispatch.Dispatcher
	rdb    redis.UniversalClient // nil without Config.Redis
	hand   *handoff.Handoff
}

// New opens the database and builds the engine.
func New(cfg Config) (*Deliverer, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("workflow_transition events are delivered synchronously and need the database: set database.url")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	box, err := secretbox.New(cfg.SecretsKey)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	var rdb redis.UniversalClient
	if cfg.Redis.URL != "" || len(cfg.Redis.Sentinel.Addrs) > 0 || len(cfg.Redis.Cluster.Addrs) > 0 {
		opt, err := app.RedisConn(cfg.Redis)
		if err != nil {
			_ = store.Close(db)
			return nil, err
		}
		rdb, _ = opt.MakeRedisClient().(redis.UniversalClient)
	}
	sender := send.NewSender(app.SenderConfig(cfg.Delivery))
	hand := handoff.New(rdb, cfg.Logger)
	disp := dispatch.New(db, sender, box, dispatch.Config{Schedule: dispatch.DefaultSchedule, Logger: cfg.Logger, Observer: hand,
		RenderTimeLimit: cfg.Delivery.TemplateTimeLimit, ConditionTimeLimit: cfg.Delivery.ConditionTimeLimit})
	return &Deliverer{db: db, sender: sender, disp: disp, rdb: rdb, hand: hand}, nil
}

// DeliverNow makes one attempt per matching webhook, recorded as Delivered
// or Exhausted, and returns an *event.SyncError naming each webhook that
// failed. Publishing the same event ID again sends nothing new.
func (d *Deliverer) DeliverNow(ctx context.Context, ev event.Event) error {
	_, err := d.disp.DeliverNow(ctx, ev)
	return err
}

// Close sends the outcomes still to be handed off, then releases the
// database and Redis connections.
func (d *Deliverer) Close() error {
	d.hand.Flush()
	d.sender.Close()
	if d.rdb != nil {
		_ = d.rdb.Close()
	}
	return store.Close(d.db)
}
