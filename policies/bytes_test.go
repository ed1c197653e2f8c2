package policies

import "testing"

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
