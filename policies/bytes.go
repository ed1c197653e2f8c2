package policies

import (
	"fmt"
	"strconv"
)

// Bytes writes a size as a person would: in the largest binary unit
// (KiB, MiB, GiB, TiB) that keeps the number at least 1, with at most
// one decimal, and without it when the size is whole in that unit:
// 32 MiB, 1.5 GiB, 64 GiB, 512 bytes.
func Bytes(b int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	if b < 1024 && b > -1024 {
		return strconv.FormatInt(b, 10) + " bytes"
	}
	v, u := float64(b), ""
	for _, unit := range units {
		if v/1024 < 1 && v/1024 > -1 {
			break
		}
		v, u = v/1024, unit
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), u)
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + u
}
