package api

import "time"

// MinRequestBytes and EvaluationBytes let the tests size budgets around
// what a request is charged.
const MinRequestBytes = minRequestBytes

func (s *Server) EvaluationBytes() int64 { return s.evaluationBytes() }

// IntakeHeld is what requests in flight hold of the intake budget now:
// the event a test waits for before it counts on a request's charge.
func (s *Server) IntakeHeld() int64 { return s.intake.held.Load() }

// SetLinger bounds the lingering close of refused requests' connections
// (idle between reads, total in all), and has lingered told how many bytes
// each discarded once its connection is closed. Call it before the server
// serves.
func (s *Server) SetLinger(idle, total time.Duration, lingered func(discarded int64)) {
	s.linger, s.lingered = linger{idle: idle, total: total}, lingered
}
