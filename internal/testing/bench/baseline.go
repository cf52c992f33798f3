package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"github.com/homingdev/homing/internal/engine/delivery/send"
	"github.com/homingdev/homing/internal/lib/logging"
	"github.com/homingdev/homing/tasks"
)

// runBaselineWorker is the bare asynq worker the throughput is compared
// with, run as its own process (this binary with -role baseline): an asynq
// server with the worker's concurrency and poll interval whose one handler
// POSTs the task's payload, already the rendered body, to the receiver through
// the same send.Sender Homing uses (one shared transport). No database,
// no state, no signature.
func runBaselineWorker(redisURL, target string, concurrency int) error {
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sender := send.NewSender(send.SenderConfig{})
	defer sender.Close()
	mux := asynq.NewServeMux()
	mux.HandleFunc(baselineTask, func(ctx context.Context, t *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("webhook-id", id)
		res := sender.Send(ctx, send.Request{Method: http.MethodPost, URL: target, Header: h, Body: t.Payload(), Timeout: 5 * time.Second})
		if !res.OK() {
			return fmt.Errorf("post: %w", res.Err)
		}
		return nil
	})
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency:       concurrency,
		Queues:            map[string]int{tasks.DefaultQueue: 1},
		TaskCheckInterval: 50 * time.Millisecond,
		Logger:            logging.Asynq(log),
		LogLevel:          asynq.WarnLevel,
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	fmt.Println("baseline started")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	srv.Shutdown()
	return nil
}
