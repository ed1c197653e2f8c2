package schema

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// ParseCPU reads an amount of CPU: cores ("4", "0.5"), millicores
// ("500m") or Nomad's MHz shares ("2400MHz", "2.4GHz"), and returns
// millicores, which berth reserves on Nomad as MHz one for one (a core is
// 1000 MHz). It rejects negative amounts, fractions of a millicore and
// anything else.
func ParseCPU(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"MHz", 1}, {"GHz", 1000}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := parseDecimal(num, u.mult)
			if err != nil {
				return 0, fmt.Errorf("cpu %q: %w; write MHz as a whole number (2400MHz) or GHz (2.4GHz)", s, err)
			}
			return n, nil
		}
	}
	if strings.HasSuffix(s, "m") {
		n, err := parseDecimal(strings.TrimSuffix(s, "m"), 1)
		if err != nil {
			return 0, fmt.Errorf("cpu %q: %w; write cores (4, 0.5) or millicores (500m)", s, err)
		}
		return n, nil
	}
	n, err := parseDecimal(s, 1000)
	if err != nil {
		return 0, fmt.Errorf("cpu %q: %w; write cores (4, 0.5) or millicores (500m)", s, err)
	}
	return n, nil
}

var byteSuffixes = []struct {
	suffix string
	mult   int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15},
}

// ParseBytes reads an amount of memory or storage: bytes ("1024") or a
// number with a binary (Ki, Mi, Gi, Ti, Pi) or decimal (k, M, G, T, P)
// suffix ("16Gi", "1.5Ti"), and returns bytes. The result must be a whole
// number of bytes that fits in an int64.
func ParseBytes(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, b := range byteSuffixes {
		if strings.HasSuffix(s, b.suffix) {
			mult, num = b.mult, strings.TrimSuffix(s, b.suffix)
			break
		}
	}
	n, err := parseDecimal(num, mult)
	if err != nil {
		return 0, fmt.Errorf("quantity %q: %w; write a number with a unit such as 16Gi or 512Mi", s, err)
	}
	return n, nil
}

// parseDecimal reads a non-negative decimal ("12", "0.25") and multiplies
// it by mult; the product must be a whole number that fits in an int64.
func parseDecimal(s string, mult int64) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("no number")
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || (hasDot && frac == "") || !allDigits(intPart) || !allDigits(frac) {
		return 0, fmt.Errorf("not a non-negative number")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("not a number")
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("not a whole number of units")
	}
	n := r.Num()
	if !n.IsInt64() || n.Int64() > math.MaxInt64/2 {
		return 0, fmt.Errorf("too large")
	}
	return n.Int64(), nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseDuration reads a Go duration ("30s", "10m", "1h30m", "0") and
// rejects negative ones.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: write a duration such as 30s, 10m or 1h", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}
