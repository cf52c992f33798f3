package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/homingdev/homing/tasks"
)

// newTaskFailures is homing_task_failures_total: every task that returned
// an error, which is never a receiver's answer (those are recorded on the
// delivery), so any increase is a problem on Homing's side to look at.
func newTaskFailures() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "homing_task_failures_total",
		Help: "Tasks that failed for a reason on Homing's side (database, Redis, secrets.key, a bad payload), by task type and reason; receivers' answers are not counted here.",
	}, []string{"type", "reason"})
	for _, typ := range []string{tasks.TypeEvent, tasks.TypeDeliver, tasks.TypeRetry, tasks.TypeSweep, tasks.TypeRetention} {
		for _, r := range tasks.Reasons() {
			c.WithLabelValues(typ, r)
		}
	}
	return c
}

// TaskFailed counts one failed task.
func (m *Metrics) TaskFailed(typ, reason string) {
	m.taskFailures.WithLabelValues(typ, reason).Inc()
}
