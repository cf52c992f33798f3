package condition

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homingdev/homing/internal/engine/delivery/budget"
	"github.com/homingdev/homing/internal/engine/delivery/send"
)

// Frappe's conditions with Python's answers, on a document as Frappe's
// app publishes it (Check fields are 0/1, Currency fields floats).
func TestPythonConditionsAnswerAsPythonDoes(t *testing.T) {
	t.Parallel()
	doc := map[string]any{
		"name": "SO-0001", "customer": "Café Nord", "empty": "", "is_return": int64(0), "docstatus": int64(1),
		"base_total": 12500.0, "grand_total": nil, "status": "To Deliver and Bill", "posting_date": "2024-01-31",
		"items": []any{map[string]any{"item_code": "A", "qty": int64(2)}},
	}
	for src, want := range map[string]bool{
		"doc.is_return == False":                         true, // starlark alone says false
		"doc.is_return == 0":                             true,
		"doc.docstatus == True":                          true,
		"not doc.is_return":                              true,
		"doc.is_return != False":                         false,
		"(doc.base_total or 0) > 10000":                  true,
		"(doc.grand_total or 0) > 10000":                 false,
		"doc.customer":                                   true,
		"doc.empty":                                      false,
		"doc.missing":                                    false,
		"doc.missing is None":                            true,
		"doc.customer is not None":                       true,
		"doc.missing == None":                            true,
		"doc.get('missing', 5) == 5":                     true,
		"doc.get('customer') == 'Café Nord'":             true,
		"doc['name'] == 'SO-0001'":                       true,
		"doc.items[0].item_code == 'A'":                  true,
		"len(doc.items) == 1 and doc.items[0].qty >= 2":  true,
		"doc.status in ('To Deliver and Bill', 'Draft')": true,
		"doc.status not in ['Draft']":                    true,
		"'Deliver' in doc.status":                        true,
		"doc.name.startswith('SO-') and doc.name.lower().endswith('0001')":      true,
		"doc.customer.upper().strip() == 'CAFÉ NORD'":                           true,
		"int(doc.base_total) == 12500 and float('1.5') == 1.5":                  true,
		"str(doc.base_total) == '12500.0'":                                      true,
		"'yes' if doc.docstatus == 1 else ''":                                   true,
		"True + True == 2":                                                      true,
		"getdate(doc.posting_date) < getdate('2024-02-01')":                     true,
		"frappe.utils.date_diff('2024-03-01', doc.posting_date) == 30":          true,
		"utils.add_days(doc.posting_date, 1) == '2024-02-01'":                   true,
		"nowdate() > '2020-01-01'":                                              true,
		"doc.docstatus == 1 and (doc.is_return == False or doc.base_total > 5)": true,
		"0 <= doc.docstatus < 2 == True":                                        false, // (0 <= 1) and (1 < 2) and (2 == True), as Python says
		"1000 < doc.base_total <= 12500":                                        true,
		"1000 < doc.base_total < 12500":                                         false,
		"'a' < doc.name < 'z' or doc.name not in ('x',)":                        true,
		"(doc.is_return < 1) == True":                                           true,
	} {
		c, err := CompileIn(LanguagePython, src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		got, err := untimedMatch(c, doc)
		if err != nil || got != want {
			t.Errorf("%s = %v %v, want %v", src, got, err, want)
		}
	}
}

// What is outside the subset is refused when the webhook is created,
// naming the construct, never evaluated as false.
func TestPythonConditionsRefuseWhatIsOutsideTheSubset(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"lambda x: x":                          "lambda",
		"[i for i in doc.items]":               "comprehension",
		"x = 1":                                "assignment",
		"def f(): return 1":                    "def",
		"open('/etc/passwd')":                  `unknown function "open"`,
		"doc.name.replace('a', 'b')":           ".replace()",
		"frappe.db.get_value('Customer', 'x')": "frappe.db",
		"frappe.utils.get_url()":               "frappe.utils.get_url",
		"foo == 1":                             `unknown name "foo"`,
		"{'a': 1}":                             "dict",
		"import os":                            "import",
		"doc.get(key='x')":                     "keyword",
	} {
		_, err := CompileIn(LanguagePython, src)
		if err == nil || !errors.Is(err, send.ErrUnbuildable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused naming %q", src, err, want)
		}
	}
}

// A Python condition is bounded like every condition: the values its
// operators build count against a memory budget.
func TestPythonConditionsAreBounded(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 900_000)
	for _, src := range []string{
		"len(doc.s * 100000) > 0",
		"len(doc.s + doc.s + doc.s + doc.s + doc.s + doc.s + doc.s + doc.s + doc.s + doc.s) > 0",
	} {
		c, err := CompileIn(LanguagePython, src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := untimedMatch(c, map[string]any{"s": big}); !errors.Is(err, budget.ErrLimit) {
			t.Errorf("%s: %v, want a limit", src, err)
		}
	}
}

// One compiled condition serves concurrent evaluations (fan-out's workers
// share it through their condition cache), each with its own document.
func TestPythonConditionIsSharedByConcurrentEvaluations(t *testing.T) {
	t.Parallel()
	c, err := CompileIn(LanguagePython, "doc.grand_total > 100 and doc.name.startswith('SO-')")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				total := float64(g*200 + i)
				ok, err := untimedMatch(c, map[string]any{"name": "SO-1", "grand_total": total})
				if err != nil || ok != (total > 100) {
					errs <- fmt.Errorf("grand_total %v: matched %v, %v", total, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Frappe's date helpers read the time they are given in Python conditions
// as in templates (TestFrappeDateHelpersReadTheGivenTime), so a
// dispatcher's clock decides what nowdate() says.
func TestPythonConditionDateHelpersReadTheGivenTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 1, 2, 23, 30, 0, 0, time.FixedZone("UTC+1", 3600))
	doc := map[string]any{"name": "SO-1", "delivery_date": "2031-01-05"}

	c, err := CompileIn(LanguagePython, "nowdate() == '2031-01-02' and date_diff(doc.delivery_date, nowdate()) == 3")
	if err != nil {
		t.Fatal(err)
	}
	for when, want := range map[time.Time]bool{at: true, at.Add(24 * time.Hour): false} {
		if ok, err := c.MatchWithin(doc, when, outOfReach); err != nil || ok != want {
			t.Errorf("condition at %s: %v, %v; want %v", when, ok, err, want)
		}
	}
}
