package jsondoc_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/lib/jsondoc"
)

// reference is what the hot path did before jsondoc: encoding/json's
// Decoder with UseNumber, then event.NormalizeNumbers, nothing but
// whitespace after the value.
func reference(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, false
	}
	return event.NormalizeNumbers(v), true
}

// referenceEncode is what delivery.Build did before jsondoc.
func referenceEncode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

var seeds = []string{
	`{"name":"SO-1","customer":"Müller & Söhne <GmbH>","grand_total":1500,"rate":12.5,"qty":-3,"ok":true,"no":false,"none":null}`,
	`{"items":[{"item":"A","qty":1},{"item":"B","qty":2.25}],"tags":[],"meta":{}}`,
	`{"big":12345678901234567890,"exp":1e3,"tiny":1e-7,"huge":1e21,"neg0":-0,"negf":-0.0,"over":1e400,"under":1e-400}`,
	`{"esc":"quote \" backslash \\ slash \/ \b\f\n\r\t","u":"\u00e9\u2028\u2029\ud83d\ude00","ctl":"\u0001\u001f"}`,
	`{"dup":1,"dup":2}`,
	" \n\t{ \"spaced\" : [ 1 , 2 ] } \r\n",
	`{"a":1}}`, `{"a":1} x`, `{"a":1,}`, `[1,]`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":tru}`,
	`{"bad":"\ud800"}`, `{"bad":"\ud800\u0041"}`, "{\"raw\":\"\xff\"}", `{"a":"\x"}`, `"just a string"`, `[1,2,3]`, `null`, ``,
	"{\"ctl\":\"a\x01b\"}",
}

// FuzzDecode: whenever Decode answers, encoding/json's path gives the same
// value; the documents events carry take the fast path.
func FuzzDecode(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := jsondoc.Decode(b)
		want, wantOK := reference(b)
		if ok && !wantOK {
			t.Fatalf("Decode(%q) = %#v, encoding/json rejects it", b, got)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, encoding/json gives %#v", b, got, want)
		}
	})
}

func TestDecodeTakesTheFastPathForEventDocuments(t *testing.T) {
	for _, s := range seeds[:6] {
		got, ok := jsondoc.Decode([]byte(s))
		if !ok {
			t.Errorf("Decode(%s) fell back to encoding/json", s)
			continue
		}
		want, _ := reference([]byte(s))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%s) = %#v, want %#v", s, got, want)
		}
	}
	m, _ := jsondoc.Decode([]byte(seeds[2]))
	doc := m.(map[string]any)
	for k, want := range map[string]any{"big": 12345678901234567890.0, "exp": 1000.0, "neg0": int64(0), "over": "1e400", "under": 0.0} {
		if doc[k] != want {
			t.Errorf("%s = %#v (%T), want %#v (%T)", k, doc[k], doc[k], want, want)
		}
	}
}

func TestDecodeLeavesTheRareCasesToEncodingJSON(t *testing.T) {
	for _, s := range []string{`{"bad":"\ud800"}`, `{"bad":"\ud800\u0041"}`, "{\"raw\":\"\xff\"}", `{"a":1}}`, `{"a":1,}`, ``} {
		if v, ok := jsondoc.Decode([]byte(s)); ok {
			t.Errorf("Decode(%q) = %#v, want a fall-back", s, v)
		}
	}
}

// FuzzAppend: for every document encoding/json decodes, Append writes the
// bytes encoding/json would.
func FuzzAppend(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := reference(b)
		if !ok {
			return
		}
		want, err := referenceEncode(v)
		if err != nil {
			t.Fatalf("encoding/json cannot encode %#v: %v", v, err)
		}
		got, ok := jsondoc.Append(nil, v)
		if !ok {
			t.Fatalf("Append(%#v) fell back", v)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Append(%#v)\n got %s\nwant %s", v, got, want)
		}
	})
}

func TestAppendMatchesEncodingJSON(t *testing.T) {
	values := []any{
		map[string]any{"b": 1.0, "a": int64(-7), "c": []any{nil, true, false, "x"}, "n": 3},
		[]any{0.1, 1e20, 1e21, 1e-6, 1e-7, -1e-7, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1)},
		"<html> & \u2028 \u2029 \x7f \x00 \x1f \xff\xfe é 😀 \"q\" \\",
		map[string]any{"\n": "k", "é": "v", "": ""},
		map[string]any(nil), []any(nil),
	}
	for _, v := range values {
		want, err := referenceEncode(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := jsondoc.Append([]byte("prefix:"), v)
		if !ok || string(got) != "prefix:"+string(want) {
			t.Errorf("Append(%#v) = %s, %v\nwant prefix:%s", v, got, ok, want)
		}
	}
}

func TestAppendLeavesWhatItDoesNotKnowToEncodingJSON(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), json.Number("1"), map[string]string{"a": "b"}, []string{"a"}, struct{}{}, float32(1)} {
		if got, ok := jsondoc.Append(nil, map[string]any{"v": v}); ok {
			t.Errorf("Append(%#v) = %s, want a fall-back", v, got)
		}
	}
	deep := any("leaf")
	for range 1100 {
		deep = []any{deep}
	}
	if _, ok := jsondoc.Append(nil, deep); ok {
		t.Error("Append of 1,100 levels did not fall back")
	}
}

func BenchmarkDecode(b *testing.B) {
	doc := []byte(seeds[0])
	b.Run("jsondoc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := jsondoc.Decode(doc); !ok {
				b.Fatal("fell back")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := reference(doc); !ok {
				b.Fatal("rejected")
			}
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	v, _ := reference([]byte(seeds[0]))
	b.Run("jsondoc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := jsondoc.Append(nil, v); !ok {
				b.Fatal("fell back")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := referenceEncode(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Marshal writes what Append writes, and what Append leaves (a
// json.Number, a struct) as encoding/json does, without HTML escaping and
// without the encoder's newline.
func TestMarshal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   any
		want string
	}{
		{map[string]any{"b": "<b>&", "a": []any{int64(1), 1500.0, nil}}, `{"a":[1,1500,null],"b":"<b>&"}`},
		{json.Number("1500.0"), `1500.0`},
		{struct {
			Name string `json:"name"`
		}{"<i>"}, `{"name":"<i>"}`},
	} {
		got, err := jsondoc.Marshal(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal(%#v) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := jsondoc.Marshal(make(chan int)); err == nil {
		t.Error("Marshal(chan) succeeded")
	}
}

// MarshalFloats writes every float64 so that it reads back as a float, and
// everything else as Marshal does: what Decode made of a document comes
// back with each number as its producer wrote it.
func TestMarshalFloats(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a": 1500.0, "b": 1500, "c": 0.5, "d": [2.0, 2, {"e": -0.0}]}`: `{"a":1500.0,"b":1500,"c":0.5,"d":[2.0,2,{"e":-0.0}]}`,
		`[1e20, 1e21, 1.5e-7, 1E2, 100]`:                                 `[100000000000000000000.0,1e+21,1.5e-7,100.0,100]`,
		`"1500.0"`:                                                       `"1500.0"`,
	} {
		v, ok := jsondoc.Decode([]byte(in))
		if !ok {
			t.Fatalf("Decode(%s) failed", in)
		}
		got, err := jsondoc.MarshalFloats(v)
		if err != nil || string(got) != want {
			t.Errorf("MarshalFloats(Decode(%s)) = %s, %v; want %s", in, got, err, want)
		}
		plain, _ := jsondoc.Marshal(v)
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(plain, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("MarshalFloats(Decode(%s)) = %s and Marshal %s are not the same JSON values", in, got, plain)
		}
	}
	if got, err := jsondoc.MarshalFloats(json.Number("1500.0")); err != nil || string(got) != "1500.0" {
		t.Errorf("MarshalFloats(json.Number) = %s, %v", got, err)
	}
}
