package text

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Plural is "1 what" or "N whats".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what // waiting reasons are written often: no Sprintf
	}
	return fmt.Sprintf("%d %ss", n, what)
}

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

// BytesQuantity writes bytes as a quantity is written in a spec: in the
// largest binary unit that keeps it whole ("64Gi", "300Mi"), else in
// bytes.
func BytesQuantity(b int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b != 0 && b%u.mult == 0 {
			return fmt.Sprintf("%d%s", b/u.mult, u.suffix)
		}
	}
	return fmt.Sprint(b)
}

// CPU writes CPU (MHz shares, 1000 a core) for a person: "8 CPUs",
// "1 CPU", "2.5 CPUs", "250m CPU".
func CPU(m int64) string {
	switch {
	case m == 1000:
		return "1 CPU"
	case m%1000 == 0:
		return fmt.Sprintf("%d CPUs", m/1000)
	case m%100 == 0:
		return fmt.Sprintf("%d.%d CPUs", m/1000, m%1000/100)
	}
	return fmt.Sprintf("%dm CPU", m)
}

// CPUQuantity writes millicores as resources.cpu is written in a spec:
// cores where whole ("8"), else millicores ("500m").
func CPUQuantity(m int64) string {
	if m%1000 == 0 {
		return fmt.Sprint(m / 1000)
	}
	return fmt.Sprintf("%dm", m)
}

// Duration writes a duration to the second, without zero units: 20m,
// 24h, 1h30m, 45s.
func Duration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Seconds writes d rounded to the second as Go writes a duration
// ("1h0m5s", "0s"): the exact figure a log line or an explanation gives.
func Seconds(d time.Duration) string { return d.Round(time.Second).String() }

// RoughDuration writes an estimated duration for people, rounded as
// much as an estimate deserves: minutes under ten hours ("1h30m"), hours
// under ten days ("30h"), days beyond ("12d"); "0m" for nothing, "1m"
// for under a minute.
func RoughDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0m"
	case d < time.Minute:
		return "1m"
	case d < 10*time.Hour:
		d = d.Round(time.Minute)
		h, m := d/time.Hour, (d%time.Hour)/time.Minute
		switch {
		case h == 0:
			return fmt.Sprintf("%dm", m)
		case m == 0:
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%02dm", h, m)
	case d < 10*24*time.Hour:
		return fmt.Sprintf("%dh", (d+time.Hour/2)/time.Hour)
	}
	return fmt.Sprintf("%dd", (d+12*time.Hour)/(24*time.Hour))
}
