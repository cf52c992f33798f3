package python

import (
	"testing"
)

// The expected texts were printed by python3's json.dumps (3.11) with the
// arguments Frappe's enqueue_webhook uses.
func TestPyDumpsWritesWhatPythonWrites(t *testing.T) {
	t.Parallel()
	for f, want := range map[float64]string{
		1500.0: "1500.0", 0.1: "0.1", 1e16: "1e+16", 1.5e-05: "1.5e-05", 123456789.123: "123456789.123",
		0.0001: "0.0001", 12345678901234567.0: "1.2345678901234568e+16", 2.5e-07: "2.5e-07",
	} {
		if got := FloatRepr(f); got != want {
			t.Errorf("repr(%v) = %q, want %q", f, got, want)
		}
	}
	obj := Object{{"b", "Café ☃ 😀 \x7f \x01 \"q\" \\ \n\t/<>"}, {"a", []any{int64(1), 2.0, nil, true}}}
	got, err := Dumps(obj)
	want := `{"b": "Caf\u00e9 \u2603 \ud83d\ude00 \u007f \u0001 \"q\" \\ \n\t/<>", "a": [1, 2.0, null, true]}`
	if err != nil || string(got) != want {
		t.Errorf("dumps:\n got %s %v\nwant %s", got, err, want)
	}
	loaded, err := Loads([]byte(`{"z": 1, "a": 1.50, "z": 2, "big": 123456789012345678901234567890, "e": 1E2, "o": {}, "l": []}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = Dumps(loaded)
	if want := `{"z": 2, "a": 1.5, "big": 123456789012345678901234567890, "e": 100.0, "o": {}, "l": []}`; string(got) != want {
		t.Errorf("dumps(loads(...)):\n got %s\nwant %s", got, want)
	}
}
