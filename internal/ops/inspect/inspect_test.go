package inspect_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func addDelivery(t *testing.T, db *gorm.DB, webhook string, at time.Time) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	row := models.Delivery{
		ID: id, WebhookID: "w-" + webhook, WebhookName: webhook, EventID: "ev-" + id, DocType: "Note", DocEvent: "on_update",
		Method: "POST", URL: "https://example.com", Payload: []byte("{}"), Status: models.StatusDelivered,
		CreatedAt: at, UpdatedAt: at,
	}
	if err := db.Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	return id
}

// TestListPageWalksEveryRowOnce pages through deliveries, several created in
// the same microsecond, while new ones arrive: every row present at the
// start is seen exactly once, in the listing's order.
func TestListPageWalksEveryRowOnce(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			ctx := context.Background()
			var want []string // newest first, as listed
			for i := range 11 {
				at := t0.Add(time.Duration(i/3) * 1500 * time.Microsecond) // ties of three
				want = append(want, addDelivery(t, db, "a", at))
				addDelivery(t, db, "b", at) // filtered out below
			}
			slices.Reverse(want)
			// Ties are ordered by id, descending: UUIDv7s made in order.
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatal("the listing does not end")
				}
				p, err := inspect.ListPage(ctx, db, "", inspect.Filter{Webhook: "a", Limit: 4, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range p.Deliveries {
					got = append(got, d.ID)
				}
				if pages == 0 {
					addDelivery(t, db, "a", t0.Add(time.Hour)) // newer than the walk: must not appear or shift it
				}
				if p.NextCursor == nil {
					if len(p.Deliveries) == 0 && len(got) != 0 {
						t.Error("the last page is empty: a cursor was returned with nothing after it")
					}
					break
				}
				if len(p.Deliveries) != 4 {
					t.Errorf("a page before the last has %d deliveries, want 4", len(p.Deliveries))
				}
				cursor = *p.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Errorf("paged listing\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestListPageRefusesForeignCursors(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	for _, c := range []string{"x", "bm90IGpzb24", "e30"} { // not base64, not JSON, {}
		_, err := inspect.ListPage(context.Background(), db, "", inspect.Filter{Cursor: c})
		if !errors.Is(err, inspect.ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", c, err)
		}
	}
	p, err := inspect.ListPage(context.Background(), db, "", inspect.Filter{})
	if err != nil || p.Deliveries == nil || len(p.Deliveries) != 0 || p.NextCursor != nil {
		t.Errorf("empty listing = %+v, %v; want an empty, non-nil page with no cursor", p, err)
	}
}

// TestListUsesIndexes checks on PostgreSQL that the document and time filters
// run as index scans in listing order, with no sort of the matching rows: at
// a million deliveries a sort per page is what makes a listing slow.
func TestListUsesIndexes(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	for i := range 50 {
		addDelivery(t, db, "a", t0.Add(time.Duration(i)*time.Second))
	}
	ctx := context.Background()
	for name, where := range map[string]string{
		"document":      "doc_type = 'Note' AND doc_name = 'N-1'",
		"document+time": "doc_type = 'Note' AND doc_name = 'N-1' AND created_at >= now() - interval '1 day' AND created_at < now()",
	} {
		var plan []string
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
				return err
			}
			return tx.Raw("EXPLAIN SELECT id FROM deliveries WHERE " + where + " ORDER BY created_at DESC, id DESC LIMIT 51").Scan(&plan).Error
		})
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "deliveries_doc") || strings.Contains(text, "Sort") {
			t.Errorf("%s: want an index scan on deliveries_doc without a sort (migration 0010), got\n%s", name, text)
		}
	}
}

// One rule for every view: attempts made over attempts allowed in all
// (max_retries + 1), and a recovered delivery's raised budget shows as such.
func TestAttemptsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempts, maxRetries int
		want                 string
	}{
		{0, 3, "0/4"},
		{1, 3, "1/4"},
		{4, 3, "4/4"}, // Exhausted
		{4, 7, "4/8"}, // the same row recovered under a webhook with max_retries 3
		{1, 0, "1/1"}, // a sync delivery gets one attempt
	} {
		if got := (inspect.Delivery{Attempts: tc.attempts, MaxRetries: tc.maxRetries}).AttemptsText(); got != tc.want {
			t.Errorf("attempts %d, max_retries %d: %q, want %q", tc.attempts, tc.maxRetries, got, tc.want)
		}
	}
}
