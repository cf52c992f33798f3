package event

import (
	"fmt"
	"strconv"
)

// checkIntegers refuses a document holding an integer literal that does not
// fit in 64 bits. Such a number would be read as a float and sent rounded
// (12345678901234567891 as 12345678901234567000, or 1.2345678901234567e+19
// in compat frappe) and recorded Delivered: the producer is told instead,
// and can send it as a string. It reads the JSON text once, outside
// strings, and parses only literals longer than 18 digits.
func checkIntegers(doc []byte) error {
	inString, escaped := false, false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		case c == '"':
			inString = true
			continue
		case c != '-' && (c < '0' || c > '9'):
			continue
		}
		start, integral := i, true
		for i < len(doc) && isNumberByte(doc[i]) {
			if c := doc[i]; c == '.' || c == 'e' || c == 'E' {
				integral = false
			}
			i++
		}
		lit := doc[start:i]
		i-- // the loop's i++ reads the byte after the literal
		if !integral || len(lit) <= 18 {
			continue
		}
		if _, err := strconv.ParseInt(string(lit), 10, 64); err != nil {
			return fmt.Errorf("the integer %s does not fit in 64 bits and would be sent rounded; send it as a string (\"%s\")", lit, lit)
		}
	}
	return nil
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
