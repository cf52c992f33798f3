package python

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/homingdev/homing/internal/gonja/exec"
)

// Jinja's round and format are Python's round() and % operator, which
// gonja's are not: gonja rounds halves away from zero and always to a
// float (3 | round is 3.0), and formats with Go's fmt ('%s' % 1500.0 is
// "%!s(float64=1500)"). Frappe's templates get Python's.

// frappeRound is Jinja's round(value, precision=0, method='common').
func frappeRound(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	precision, method := 0, "common"
	for i, a := range params.Args {
		switch i {
		case 0:
			precision = a.Integer()
		case 1:
			method = a.String()
		default:
			return exec.AsValue(fmt.Errorf("round takes precision and method"))
		}
	}
	for k, a := range params.KwArgs {
		switch k {
		case "precision":
			precision = a.Integer()
		case "method":
			method = a.String()
		default:
			return exec.AsValue(fmt.Errorf("round takes precision and method, not %s", k))
		}
	}
	if !in.IsNumber() && !in.IsBool() {
		return exec.AsValue(fmt.Errorf("round: %s is not a number", in.String()))
	}
	precision = min(max(precision, -400), 400)
	switch method {
	case "common":
		// Python's round(value, precision): an int stays an int.
		if !in.IsFloat() {
			return exec.AsValue(roundInt(int64(in.Integer()), precision))
		}
		return exec.AsValue(roundFloat(in.Float(), precision))
	case "floor", "ceil":
		// math.floor/ceil(value * 10**precision) / 10**precision: a float.
		op := math.Floor
		if method == "ceil" {
			op = math.Ceil
		}
		scale := math.Pow(10, float64(precision))
		return exec.AsValue(op(in.Float()*scale) / scale)
	}
	return exec.AsValue(fmt.Errorf("round: method must be common, ceil or floor, not %q", method))
}

// roundFloat is Python's round(f, precision): to the nearest, halves to
// even, on f's exact binary value (round(2.675, 2) is 2.67).
func roundFloat(f float64, precision int) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	if precision >= 0 {
		// strconv rounds the exact decimal value, halves to even.
		r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'f', precision, 64), 64)
		if err != nil {
			return f
		}
		return r
	}
	scale := math.Pow(10, float64(-precision))
	return math.RoundToEven(f/scale) * scale
}

// roundInt is Python's round(n, precision) for an int: n itself unless
// precision is negative, then to the nearest multiple, halves to even.
func roundInt(n int64, precision int) int64 {
	if precision >= 0 {
		return n
	}
	if precision < -18 {
		return 0
	}
	scale := int64(math.Pow10(-precision))
	q, r := n/scale, n%scale
	if r < 0 {
		q, r = q-1, r+scale
	}
	if 2*r > scale || (2*r == scale && q%2 != 0) {
		q++
	}
	return q * scale
}

// frappeFormat is Jinja's format: the input % (args or kwargs), with
// Python's printf-style conversions.
func frappeFormat(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if len(params.Args) > 0 && len(params.KwArgs) > 0 {
		return exec.AsValue(fmt.Errorf("format: give either positional or keyword arguments, not both"))
	}
	s, err := pyPercent(Str(in), params.Args, params.KwArgs)
	if err != nil {
		return exec.AsValue(fmt.Errorf("format: %w", err))
	}
	return exec.AsValue(s)
}

// pyPercent is Python's format % args (or % kwargs for %(name)s):
// conversions s r a d i u f F e E g G x X o c and %, with the flags
// -+ #0, a width and a precision ('*' is not supported).
func pyPercent(format string, args []*exec.Value, kwargs map[string]*exec.Value) (string, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		var key *string
		if i < len(format) && format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 {
				return "", fmt.Errorf("incomplete format key")
			}
			k := format[i+1 : i+end]
			key, i = &k, i+end+1
		}
		start := i
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			i++
		}
		for i < len(format) && (format[i] >= '0' && format[i] <= '9' || format[i] == '.') {
			i++
		}
		for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
			i++
		}
		if i >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		spec := strings.Map(func(r rune) rune {
			if r == 'h' || r == 'l' || r == 'L' {
				return -1
			}
			return r
		}, format[start:i])
		verb := format[i]
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		var arg *exec.Value
		switch {
		case key != nil:
			v, ok := kwargs[*key]
			if !ok {
				return "", fmt.Errorf("no argument named %q", *key)
			}
			arg = v
		case next < len(args):
			arg, next = args[next], next+1
		default:
			return "", fmt.Errorf("not enough arguments for format string")
		}
		out, err := pyConvert(spec, verb, arg)
		if err != nil {
			return "", err
		}
		b.WriteString(out)
	}
	if next < len(args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// pyConvert writes one argument for a %-conversion with its flags, width
// and precision (spec).
func pyConvert(spec string, verb byte, arg *exec.Value) (string, error) {
	switch verb {
	case 's', 'r', 'a':
		text := Str(arg)
		if verb != 's' && arg.IsString() {
			text = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(text) + "'"
		}
		return fmt.Sprintf("%"+strings.Trim(spec, "+ #0")+"s", text), nil
	case 'd', 'i', 'u', 'x', 'X', 'o':
		n, err := pyIntOf(arg, verb)
		if err != nil {
			return "", err
		}
		goVerb := map[byte]string{'d': "d", 'i': "d", 'u': "d", 'x': "x", 'X': "X", 'o': "o"}[verb]
		out := fmt.Sprintf("%"+spec+goVerb, n)
		if verb == 'o' && strings.Contains(spec, "#") {
			// Python's alternate octal is 0o17, Go's 017.
			out = strings.Replace(out, "0", "0o", 1)
		}
		return out, nil
	case 'f', 'F', 'e', 'E', 'g', 'G':
		if !arg.IsNumber() && !arg.IsBool() {
			return "", fmt.Errorf("%%%c format: a real number is required, not %s", verb, arg.String())
		}
		f := arg.Float()
		if arg.IsBool() && arg.Bool() {
			f = 1
		}
		goVerb := string(verb)
		if verb == 'F' {
			goVerb = "f"
		}
		return fmt.Sprintf("%"+spec+goVerb, f), nil
	case 'c':
		if arg.IsString() && len([]rune(arg.String())) == 1 {
			return fmt.Sprintf("%"+strings.Trim(spec, "+ #0")+"s", arg.String()), nil
		}
		if arg.IsInteger() {
			return fmt.Sprintf("%"+strings.Trim(spec, "+ #0")+"c", rune(arg.Integer())), nil
		}
		return "", fmt.Errorf("%%c requires an int or a single character")
	}
	return "", fmt.Errorf("unsupported format character %q", verb)
}

// pyIntOf is Python's int() of a %d argument: a float truncated (exactly,
// at any size), a bool 0 or 1.
func pyIntOf(arg *exec.Value, verb byte) (*big.Int, error) {
	switch {
	case arg.IsBool():
		if arg.Bool() {
			return big.NewInt(1), nil
		}
		return big.NewInt(0), nil
	case arg.IsFloat():
		f := arg.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("cannot convert float %s to integer", Str(arg))
		}
		if verb != 'd' && verb != 'i' && verb != 'u' {
			return nil, fmt.Errorf("%%%c format: an integer is required, not float", verb)
		}
		n, _ := big.NewFloat(math.Trunc(f)).Int(nil)
		return n, nil
	case arg.IsInteger():
		return big.NewInt(int64(arg.Integer())), nil
	}
	return nil, fmt.Errorf("%%%c format: a real number is required, not %s", verb, arg.String())
}
