package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/homingdev/homing/internal/intake/dbstate"
)

// databaseCollector reads a dbstate.Watcher at scrape time:
// homing_database_errors_total{kind} and homing_database_up. The watcher
// keeps the counts, so the API, the relay and the tasks, which report to
// the watcher and not to a registry, are all counted.
type databaseCollector struct {
	w      *dbstate.Watcher
	errors *prometheus.Desc
	up     *prometheus.Desc
}

func newDatabaseCollector(w *dbstate.Watcher) *databaseCollector {
	return &databaseCollector{
		w: w,
		errors: prometheus.NewDesc("homing_database_errors_total",
			"Database errors this process met, by kind: unavailable (no connection, shutting down, starting up, in recovery), read_only (a demoted primary), timeout, busy (SQLite locked), conflict (serialization failure, deadlock), other. unavailable and read_only are an outage: alert on them.",
			[]string{"kind"}, nil),
		up: prometheus.NewDesc("homing_database_up",
			"1 while the database answers and takes writes, 0 during an outage (logged at ERROR when it starts and at INFO when it ends).", nil, nil),
	}
}

func (c *databaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.errors
	ch <- c.up
}

func (c *databaseCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.w.Errors()
	for _, k := range dbstate.Kinds() {
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(counts[k]), string(k))
	}
	up := 1.0
	if c.w.Err() != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}
