package api

// MinRequestBytes and EvaluationBytes let the tests size budgets around
// what a request is charged.
const MinRequestBytes = minRequestBytes

func (s *Server) EvaluationBytes() int64 { return s.evaluationBytes() }
