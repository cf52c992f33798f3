-- Traces (issue 37, part 2): the W3C trace context an event was published
-- in ("<traceparent>[ <tracestate>]", package tracing), kept with the event
-- until it is fanned out and with each of its deliveries after, so that a
-- retry hours later joins the same trace. NULL when the event came with
-- none (tracing off: nothing is written).
ALTER TABLE outbox_events ADD COLUMN trace_context text;
ALTER TABLE deliveries ADD COLUMN trace_context text;
