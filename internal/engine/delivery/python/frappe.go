package python

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/homingdev/homing/internal/gonja/exec"
)

// Utils is the utils namespace of Frappe templates and conditions,
// with now as the current time (in UTC: Homing has no site time zone) of
// nowdate, now and the helpers given no date.
func Utils(now time.Time) map[string]any {
	now = now.UTC()
	getdate := func(args ...*exec.Value) (time.Time, error) { return getdateAt(now, args...) }
	getdatetime := func(args ...*exec.Value) (time.Time, error) { return getdatetimeAt(now, args...) }
	return map[string]any{
		"nowdate": func(...*exec.Value) (any, error) { return now.Format("2006-01-02"), nil },
		"now":     func(...*exec.Value) (any, error) { return now.Format("2006-01-02 15:04:05.000000"), nil },
		"getdate": func(args ...*exec.Value) (any, error) {
			d, err := getdate(args...)
			if err != nil {
				return nil, err
			}
			return d.Format("2006-01-02"), nil
		},
		"add_days": func(args ...*exec.Value) (any, error) {
			if len(args) != 2 {
				return nil, fmt.Errorf("add_days(date, days) takes 2 arguments")
			}
			d, err := getdate(args[0])
			if err != nil {
				return nil, err
			}
			return d.AddDate(0, 0, int(cint(args[1]))).Format("2006-01-02"), nil
		},
		"date_diff": func(args ...*exec.Value) (any, error) {
			if len(args) != 2 {
				return nil, fmt.Errorf("date_diff(end, start) takes 2 arguments")
			}
			a, err := getdate(args[0])
			if err != nil {
				return nil, err
			}
			b, err := getdate(args[1])
			if err != nil {
				return nil, err
			}
			return int(a.Sub(b).Hours() / 24), nil
		},
		"format_date": func(args ...*exec.Value) (any, error) {
			d, err := getdate(firstArg(args))
			if err != nil {
				return nil, err
			}
			layout := "dd-mm-yyyy" // Frappe's default date_format
			if len(args) > 1 && !args[1].IsNil() {
				layout = args[1].String()
			}
			return formatFrappeDate(d, layout), nil
		},
		"format_datetime": func(args ...*exec.Value) (any, error) {
			t, err := getdatetime(firstArg(args))
			if err != nil {
				return nil, err
			}
			layout := "dd-mm-yyyy HH:mm:ss"
			if len(args) > 1 && !args[1].IsNil() {
				layout = args[1].String()
			}
			return formatFrappeDate(t, layout), nil
		},
		"fmt_money": func(args ...*exec.Value) (any, error) {
			precision := 2
			if len(args) > 1 && !args[1].IsNil() {
				precision = int(cint(args[1]))
			}
			s := groupThousands(flt(firstArg(args)), min(max(precision, 0), 9))
			if len(args) > 2 && !args[2].IsNil() && args[2].String() != "" {
				s = args[2].String() + " " + s
			}
			return s, nil
		},
		"format_value": func(args ...*exec.Value) (any, error) { return cstr(firstArg(args)), nil },
		"flt":          func(args ...*exec.Value) (any, error) { return flt(firstArg(args)), nil },
		"cint":         func(args ...*exec.Value) (any, error) { return cint(firstArg(args)), nil },
		"cstr":         func(args ...*exec.Value) (any, error) { return cstr(firstArg(args)), nil },
	}
}

func firstArg(args []*exec.Value) *exec.Value {
	if len(args) == 0 {
		return exec.AsValue(nil)
	}
	return args[0]
}

// Filters are the filters Frappe's Jinja adds (frappe/utils/jinja.py,
// set_filters: json = frappe.as_json, len, int = cint, str = cstr, flt),
// and cint and cstr under their own names, with Python's semantics for
// Jinja's own json, tojson, sum, round and format. The map is built once
// and shared: callers read it and never change it.
func Filters() map[string]exec.FilterFunction { return filters() }

var filters = sync.OnceValue(func() map[string]exec.FilterFunction {
	return map[string]exec.FilterFunction{
		"json": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
			// frappe.as_json: json.dumps(obj, indent=1, sort_keys=True,
			// separators=(",", ": ")), so a float stays 1500.0.
			indent := 1
			return pyFilterDumps("json", in, pyEncoder{indent: &indent, itemSep: ",", sortKeys: true}, false)
		},
		// Jinja's tojson: htmlsafe_json_dumps with sort_keys=True.
		"tojson": frappeToJSON,
		// Jinja's sum is Python's: an int while every term is one.
		"sum": frappeSum,
		// Python's round() and % operator.
		"round":  frappeRound,
		"format": frappeFormat,
		"len":    func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value { return exec.AsValue(in.Len()) },
		// set_filters maps "str" to cstr and "int" to cint.
		"str":  func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value { return exec.AsValue(cstr(in)) },
		"int":  func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value { return exec.AsValue(cint(in)) },
		"flt":  func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value { return exec.AsValue(flt(in)) },
		"cint": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value { return exec.AsValue(cint(in)) },
		"cstr": func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value { return exec.AsValue(cstr(in)) },
	}
})

// WallIfZero is t, or the wall clock's time when t is zero: the one place
// the helpers read it, for callers (previews, tests) that give no time.
func WallIfZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t
}

// Globals are the names Frappe's templates and conditions read
// besides doc, with now as the current time.
func Globals(now time.Time) map[string]any {
	utils := Utils(now)
	return map[string]any{"utils": utils, "frappe": map[string]any{"utils": utils}}
}

// flt is frappe.utils.flt without precision: a float, 0.0 for what is no
// number.
func flt(v *exec.Value) float64 {
	switch {
	case v == nil || v.IsNil():
		return 0
	case v.IsFloat():
		return v.Float()
	case v.IsInteger():
		return float64(v.Integer())
	case v.IsBool():
		if v.Bool() {
			return 1
		}
		return 0
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(v.String()), ",", ""), 64)
	if err != nil || math.IsNaN(f) {
		return 0
	}
	return f
}

// cint is frappe.utils.cint: int(flt(v)).
func cint(v *exec.Value) int64 {
	if v != nil && v.IsInteger() {
		return int64(v.Integer())
	}
	return int64(flt(v))
}

// cstr is frappe.utils.cstr: "" for None, else str(v).
func cstr(v *exec.Value) string {
	if v == nil || v.IsNil() {
		return ""
	}
	return Str(v)
}

// getdateAt is Frappe's getdate: the date of its argument, or of now
// without one.
func getdateAt(now time.Time, args ...*exec.Value) (time.Time, error) {
	t, err := getdatetimeAt(now, args...)
	if err != nil {
		return t, err
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
}

// getdatetimeAt is Frappe's get_datetime: its argument parsed, or now
// without one.
func getdatetimeAt(now time.Time, args ...*exec.Value) (time.Time, error) {
	if len(args) == 0 || args[0].IsNil() {
		return now, nil
	}
	s := strings.TrimSpace(args[0].String())
	for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02 15:04:05", "2006-01-02T15:04:05.999999Z07:00", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date (YYYY-MM-DD)", s)
}

// formatFrappeDate writes t in a Frappe date format (dd, mm, yyyy, yy,
// HH, mm after HH, ss).
func formatFrappeDate(t time.Time, layout string) string {
	r := strings.NewReplacer("yyyy", "2006", "yy", "06", "dd", "02", "HH", "15", "ss", "05")
	out := r.Replace(layout)
	// mm is the month in the date part and minutes after an hour.
	if i := strings.Index(out, "15"); i >= 0 {
		out = strings.ReplaceAll(out[:i], "mm", "01") + strings.ReplaceAll(out[i:], "mm", "04")
	} else {
		out = strings.ReplaceAll(out, "mm", "01")
	}
	return t.Format(out)
}

// groupThousands writes f with precision decimals and "," between
// thousands: Frappe's default number format "#,###.##".
func groupThousands(f float64, precision int) string {
	s := strconv.FormatFloat(math.Abs(f), 'f', precision, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if f < 0 {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}
