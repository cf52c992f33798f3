-- homing serve queues the events it accepts itself, after their commit, and
-- writes their outbox rows already marked queued (issue 27: the intake). The
-- relay has nothing to do for such rows, so only an insert of a row still to
-- be queued (client.PublishTx) wakes it: a row-level trigger whose WHEN
-- clause is checked without calling the function for queued rows. The
-- notifications of one transaction still fold into one (same channel, same
-- empty payload).
DROP TRIGGER outbox_events_notify ON outbox_events;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
    FOR EACH ROW WHEN (NEW.queued_at IS NULL) EXECUTE FUNCTION homing_outbox_notify();
