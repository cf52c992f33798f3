package exec

import (
	"errors"
	"math"
	"math/bits"

	"github.com/homingdev/homing/internal/gonja/tokens"
)

// homing: arithmetic follows Python where Go would wrap around, panic or
// give ±Inf: division and modulo by zero are errors, floor division and
// modulo round toward negative infinity, and an integer result that does
// not fit in 64 bits is an error (Python would make a big integer).

var (
	errDivisionByZero = errors.New("division by zero")
	errModuloByZero   = errors.New("modulo by zero")
	errIntOverflow    = errors.New("integer overflow: the result does not fit in 64 bits")
	errTooLarge       = errors.New("numerical result too large")
)

// arithmetic computes left op right for -, *, /, //, % and ** on numbers,
// and reports whether op was one of them.
func arithmetic(op tokens.Type, left, right *Value) (*Value, bool) {
	float := left.IsFloat() || right.IsFloat()
	switch op {
	case tokens.Addition:
		if float || left.IsString() || right.IsString() || left.IsList() {
			return nil, false
		}
		a, b := left.Integer(), right.Integer()
		s := a + b
		if (s > a) != (b > 0) {
			return AsValue(errIntOverflow), true
		}
		return AsValue(s), true
	case tokens.Subtraction:
		if float {
			return floatResult(left.Float() - right.Float()), true
		}
		a, b := left.Integer(), right.Integer()
		d := a - b
		if (d < a) != (b > 0) {
			return AsValue(errIntOverflow), true
		}
		return AsValue(d), true
	case tokens.Multiply:
		if left.IsString() {
			return nil, false
		}
		if float {
			return floatResult(left.Float() * right.Float()), true
		}
		p, ok := mulInt(left.Integer(), right.Integer())
		if !ok {
			return AsValue(errIntOverflow), true
		}
		return AsValue(p), true
	case tokens.Division:
		if right.Float() == 0 {
			return AsValue(errDivisionByZero), true
		}
		return floatResult(left.Float() / right.Float()), true
	case tokens.FloorDivision:
		if float {
			if right.Float() == 0 {
				return AsValue(errDivisionByZero), true
			}
			// As in Python, a float operand makes a float, floored.
			return floatResult(math.Floor(left.Float() / right.Float())), true
		}
		a, b := left.Integer(), right.Integer()
		if b == 0 {
			return AsValue(errDivisionByZero), true
		}
		if a == math.MinInt64 && b == -1 {
			return AsValue(errIntOverflow), true
		}
		q := a / b
		if (a%b != 0) && ((a < 0) != (b < 0)) {
			q--
		}
		return AsValue(q), true
	case tokens.Modulo:
		if float {
			b := right.Float()
			if b == 0 {
				return AsValue(errModuloByZero), true
			}
			m := math.Mod(left.Float(), b)
			if m != 0 && (m < 0) != (b < 0) {
				m += b
			}
			return floatResult(m), true
		}
		a, b := left.Integer(), right.Integer()
		if b == 0 {
			return AsValue(errModuloByZero), true
		}
		if b == -1 {
			return AsValue(0), true
		}
		m := a % b
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return AsValue(m), true
	case tokens.Power:
		if !float && right.Integer() >= 0 {
			p, ok := powInt(left.Integer(), right.Integer())
			if !ok {
				return AsValue(errIntOverflow), true
			}
			return AsValue(p), true
		}
		if left.Float() == 0 && right.Float() < 0 {
			return AsValue(errDivisionByZero), true
		}
		return floatResult(math.Pow(left.Float(), right.Float())), true
	}
	return nil, false
}

// floatResult refuses the infinities Python raises OverflowError for.
func floatResult(f float64) *Value {
	if math.IsInf(f, 0) {
		return AsValue(errTooLarge)
	}
	return AsValue(f)
}

func mulInt(a, b int) (int, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(absInt(a)), uint64(absInt(b)))
	neg := (a < 0) != (b < 0)
	if hi != 0 || a == math.MinInt64 || b == math.MinInt64 {
		if neg && hi == 0 && lo == 1<<63 {
			return math.MinInt64, true
		}
		return 0, false
	}
	if lo > math.MaxInt64 {
		if neg && lo == 1<<63 {
			return math.MinInt64, true
		}
		return 0, false
	}
	if neg {
		return -int(lo), true
	}
	return int(lo), true
}

func absInt(a int) int {
	if a < 0 {
		return -a
	}
	return a
}

// powInt is base**exp by squaring, refusing overflow.
func powInt(base, exp int) (int, bool) {
	result := 1
	for exp > 0 {
		if exp&1 == 1 {
			var ok bool
			if result, ok = mulInt(result, base); !ok {
				return 0, false
			}
		}
		exp >>= 1
		if exp > 0 {
			var ok bool
			if base, ok = mulInt(base, base); !ok {
				return 0, false
			}
		}
	}
	return result, true
}
