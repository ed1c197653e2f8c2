package text

import (
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	for in, want := range map[int64]string{
		32 << 20:         "32 MiB",
		64 << 30:         "64 GiB",
		3 << 29:          "1.5 GiB",
		512:              "512 bytes",
		1 << 10:          "1 KiB",
		(1 << 30) + 1000: "1 GiB",
		5 << 40:          "5 TiB",
	} {
		if got := Bytes(in); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestPlural(t *testing.T) {
	for in, want := range map[int]string{0: "0 GPUs", 1: "1 GPU", 2: "2 GPUs"} {
		if got := Plural(in, "GPU"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestBytesQuantity(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 64 << 30: "64Gi", 300 << 20: "300Mi", 3 << 29: "1536Mi", 1000: "1000", 2 << 50: "2Pi"} {
		if got := BytesQuantity(in); got != want {
			t.Errorf("BytesQuantity(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestCPU(t *testing.T) {
	for in, want := range map[int64]string{1000: "1 CPU", 8000: "8 CPUs", 2500: "2.5 CPUs", 250: "250m CPU", 0: "0 CPUs"} {
		if got := CPU(in); got != want {
			t.Errorf("CPU(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestCPUQuantity(t *testing.T) {
	for in, want := range map[int64]string{8000: "8", 500: "500m", 0: "0", 2500: "2500m"} {
		if got := CPUQuantity(in); got != want {
			t.Errorf("CPUQuantity(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{
		20 * time.Minute: "20m", 24 * time.Hour: "24h", 90 * time.Minute: "1h30m",
		45 * time.Second: "45s", 90*time.Minute + 1400*time.Millisecond: "1h30m1s",
	} {
		if got := Duration(in); got != want {
			t.Errorf("Duration(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestRoughDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{
		0: "0m", -time.Hour: "0m", 10 * time.Second: "1m", 90 * time.Minute: "1h30m",
		2 * time.Hour: "2h", 40 * time.Minute: "40m", 30 * time.Hour: "30h", 12 * 24 * time.Hour: "12d",
	} {
		if got := RoughDuration(in); got != want {
			t.Errorf("RoughDuration(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for in, want := range map[time.Duration]string{
		0: "0s", 1499 * time.Millisecond: "1s", time.Hour + 5*time.Second: "1h0m5s", 90 * time.Minute: "1h30m0s",
	} {
		if got := Seconds(in); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", in, got, want)
		}
	}
}
