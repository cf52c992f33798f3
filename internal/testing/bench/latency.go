package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/homingdev/homing/client"
)

// latencyResult is one run of the latency scenario.
type latencyResult struct {
	Events   int     `json:"events"`
	Rate     float64 `json:"achieved_rate"`
	P50MS    float64 `json:"p50_ms"`
	P95MS    float64 `json:"p95_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
	Received int     `json:"received"`
}

// runLatency publishes at a steady rate for d to a running worker and
// measures, per event, the time from just before Publish to the receiver
// reading the request (one clock: publisher and receiver share this process).
func (e *env) runLatency(ctx context.Context, rate int, d time.Duration, concurrency int) (latencyResult, error) {
	if err := e.reset(ctx); err != nil {
		return latencyResult{}, err
	}
	if err := e.createHooks(ctx, 1, 3); err != nil {
		return latencyResult{}, err
	}
	return e.measureLatency(ctx, rate, d, concurrency, nil)
}

// measureLatency starts a worker, publishes Sales Order on_submit events at
// rate for d and returns their enqueue → receiver latencies; the database
// already holds the webhooks (and whatever else the scenario put there).
// alongside, when set, runs while the events are published, with a context
// cancelled when publishing ends; measureLatency waits for it to return.
func (e *env) measureLatency(ctx context.Context, rate int, d time.Duration, concurrency int, alongside func(context.Context)) (latencyResult, error) {
	pub, err := client.New(client.Config{RedisURL: e.redisURL})
	if err != nil {
		return latencyResult{}, err
	}
	defer pub.Close()
	worker, err := startProcess("worker", e.binDir, filepath.Join(e.binDir, "worker"), nil,
		e.homingEnv("HOMING_WORKER_CONCURRENCY="+strconv.Itoa(concurrency)), "worker started")
	if err != nil {
		return latencyResult{}, err
	}
	defer func() { _ = worker.stop() }()
	total := int(float64(rate) * d.Seconds())
	done := e.recv.expect(total, 0, true)
	gap := time.Second / time.Duration(rate)
	beside, endBeside := context.WithCancel(ctx)
	besideDone := make(chan struct{})
	go func() {
		defer close(besideDone)
		if alongside != nil {
			alongside(beside)
		}
	}()
	defer func() { endBeside(); <-besideDone }()
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * gap)); wait > 0 {
			time.Sleep(wait) // pacing the publisher, not waiting for a result
		}
		doc := benchDoc(i)
		doc["sent_ns"] = time.Now().UnixNano()
		if _, err := pub.Publish(ctx, client.Event{DocType: "Sales Order", DocName: fmt.Sprintf("SO-%07d", i), Event: "on_submit", Doc: doc}); err != nil {
			return latencyResult{}, err
		}
	}
	achieved := float64(total) / time.Since(start).Seconds()
	endBeside()
	<-besideDone
	if err := waitDone(ctx, done, 2*time.Minute, func() string { return fmt.Sprintf("%+v", e.recv.counts()) }); err != nil {
		return latencyResult{}, err
	}
	lat := e.recv.takeLatencies()
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
	}
	return latencyResult{
		Events: total, Rate: achieved, Received: len(lat),
		P50MS: ms(0.50), P95MS: ms(0.95), P99MS: ms(0.99), MaxMS: float64(lat[len(lat)-1]) / float64(time.Millisecond),
	}, nil
}
