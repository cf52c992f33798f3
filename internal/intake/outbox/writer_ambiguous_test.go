package outbox

import (
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/testing/testenv"
)

// A batch whose commit was answered with an error after the server had
// committed it (a failover) is run again input by input (groupcommit): each
// input then finds its own record. It is Added, not a repeat, so its
// publisher gets 202 and its event is queued; a true repeat of the same ID
// and body (another time) stays a repeat, and another body a conflict.
func TestWriteAgainAfterAnAmbiguousCommitIsAdded(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			now := time.Now().UTC().Truncate(time.Microsecond)
			in := func(id, hash, accept string) writeIn {
				return writeIn{tenant: "default", id: id, payload: []byte(`{}`), hash: hash, now: now, accept: accept}
			}
			write := func(ins ...writeIn) []Outcome {
				t.Helper()
				var outs []Outcome
				if err := db.Transaction(func(tx *gorm.DB) error {
					var err error
					outs, err = writeBatch(tx, ins, true)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return outs
			}
			// The batch that committed though its caller saw an error.
			first := []writeIn{in("ev-1", "h1", "a1"), in("ev-2", "h2", "a2")}
			if got := write(first...); got[0] != Added || got[1] != Added {
				t.Fatalf("first write %v", got)
			}
			// Its inputs run again alone, and true repeats beside them.
			for _, c := range []struct {
				in   writeIn
				want Outcome
			}{
				{first[0], Added},
				{first[1], Added},
				{in("ev-1", "h1", "a3"), Requeued},
				{in("ev-1", "other", "a4"), Conflict},
			} {
				if got := write(c.in); got[0] != c.want {
					t.Errorf("%s (hash %s, accept ID %s): %v, want %v", c.in.id, c.in.hash, c.in.accept, got[0], c.want)
				}
			}
			// Within one batch, a second publish of an ID it adds is a repeat.
			if got := write(in("ev-3", "h3", "a5"), in("ev-3", "h3", "a6")); got[0] != Added || got[1] == Added {
				t.Errorf("ev-3 twice in one batch: %v, want Added then a repeat", got)
			}
		})
	}
}
