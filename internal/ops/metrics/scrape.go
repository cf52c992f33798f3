package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// CachedHandler serves the metrics as Handler does, but runs one collection
// at a time and answers every scrape within Options.ScrapeCache of a
// collection from it: a scrape that arrives while one is collecting waits
// for it and shares its result. A collection reads the database and Redis,
// so scrapers, however many, cost at most one collection at a time and one
// a ScrapeCache. The metrics server's /metrics is this handler.
func (m *Metrics) CachedHandler() http.Handler {
	return promhttp.HandlerFor(&cachedGatherer{g: m.reg, ttl: m.scrapeCache, now: m.scrapeNow}, promhttp.HandlerOpts{
		ErrorLog:      printer{m.log},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// cachedGatherer is a Gatherer that gathers at most once a ttl. Its mutex is
// held while it gathers, so concurrent callers wait for the collection in
// flight and then take its result.
type cachedGatherer struct {
	g   prometheus.Gatherer
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	at   time.Time
	ok   bool
	mfs  []*dto.MetricFamily
	errs error
}

func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.ok && now.Sub(c.at) < c.ttl && !now.Before(c.at) {
		return c.mfs, c.errs
	}
	// The families are only encoded by the handlers that share them,
	// never changed.
	c.mfs, c.errs = c.g.Gather()
	c.at, c.ok = now, true
	return c.mfs, c.errs
}
