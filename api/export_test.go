package api

// MinRequestBytes and EvaluationBytes let the tests size budgets around
// what a request is charged.
const MinRequestBytes = minRequestBytes

func (s *Server) EvaluationBytes() int64 { return s.evaluationBytes() }

// IntakeHeld is what requests in flight hold of the intake budget now:
// the event a test waits for before it counts on a request's charge.
func (s *Server) IntakeHeld() int64 { return s.intake.held.Load() }
