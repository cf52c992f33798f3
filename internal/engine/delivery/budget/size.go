package budget

import (
	"fmt"
	"math"
)

// sizeText is n bytes as a message says it; MaxInt stands for a size
// that overflowed.
func sizeText(n int) string {
	if n == math.MaxInt {
		return "more bytes than fit in memory"
	}
	return fmt.Sprintf("%d bytes", n)
}

// MulSize is a*b, or MaxInt when that overflows.
func MulSize(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// AddSize is a+b, or MaxInt when that overflows.
func AddSize(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}
