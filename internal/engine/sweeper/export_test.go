package sweeper

import "time"

// PollFull is how long a tick waits on its clock before it looks again at
// a full queue or a webhook it is probing: what a test advances a stub
// clock by to move a waiting tick on.
const PollFull = pollFull

// ProbeArgs are the probe parameters a step's query takes at now, with cfg
// (BenchmarkSweepSelect runs the query as a step does).
func ProbeArgs(cfg Config, now time.Time) map[string]any {
	return (&Sweeper{cfg: cfg}).probeArgs(now)
}
