package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/homingdev/homing/models"
)

// TestPagesSayStatusesInWords: the overview counts six deliveries waiting
// minutes for their retry as six scheduled retries (it read "due retries 0
// / none due", issue 38), and the deliveries list and a delivery's page say
// each state in words, on real PostgreSQL.
func TestPagesSayStatusesInWords(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	var d1 models.Delivery
	if err := s.db.Take(&d1, "id = ?", "d-1").Error; err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, id := range []string{"d-2", "d-3", "d-4", "d-5", "d-6"} {
		d := d1
		d.ID, d.EventID = id, "ev-"+id
		next := now.Add(20*time.Minute + 30*time.Second) // "in 20 min" for the next 30 s
		d.NextRetry = &next
		if err := s.db.Create(&d).Error; err != nil {
			t.Fatal(err)
		}
	}
	gone := d1
	gone.ID, gone.EventID, gone.Status, gone.NextRetry, gone.Attempts = "d-7", "ev-7", models.StatusExhausted, nil, 4
	if err := s.db.Create(&gone).Error; err != nil {
		t.Fatal(err)
	}
	c := s.login(s.admin)
	for path, want := range map[string][]string{
		"/console/": {`id="scheduled">6</b>`, `<span id="next-retry">next retry in 4m</span>`, `<span id="due-now">0 due now</span>`,
			`title="Failed">Retrying</th>`, `title="Exhausted">Given up</th>`},
		"/console/deliveries":     {`title="Failed">Retrying: attempt 2 of 4 in 20 min</span>`, `title="Exhausted">Gave up after 4 attempts</span>`},
		"/console/deliveries/d-1": {`id="status" title="Failed">Retrying: attempt 2 of 4 in `},
		"/console/deliveries/d-7": {`id="status" title="Exhausted">Gave up after 4 attempts</span>`},
	} {
		res, body := s.do("GET", path, nil, c, nil)
		if res.StatusCode != 200 {
			t.Errorf("GET %s: %d", path, res.StatusCode)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s does not show %s", path, w)
			}
		}
		if strings.Contains(body, "none due") {
			t.Errorf("GET %s says none due", path)
		}
	}
}
