package schema

import (
	"testing"
	"time"
)

func TestParseCPU(t *testing.T) {
	tests := map[string]struct {
		in   string
		want int64
		ok   bool
	}{
		"cores":           {"4", 4000, true},
		"fraction":        {"0.5", 500, true},
		"millicores":      {"500m", 500, true},
		"zero":            {"0", 0, true},
		"finer than 1m":   {"0.0001", 0, false},
		"fraction of 1m":  {"1.5m", 0, false},
		"negative":        {"-1", 0, false},
		"unit":            {"4cores", 0, false},
		"empty":           {"", 0, false},
		"exponent":        {"1e3", 0, false},
		"too large":       {"99999999999999999999", 0, false},
		"dot only":        {".5", 0, false},
		"trailing dot":    {"5.", 0, false},
		"m only":          {"m", 0, false},
		"big millicores":  {"250000m", 250000, true},
		"decimal in core": {"2.25", 2250, true},
		"MHz":             {"2400MHz", 2400, true},
		"GHz":             {"2.4GHz", 2400, true},
		"fraction of MHz": {"0.5MHz", 0, false},
		"MHz only":        {"MHz", 0, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCPU(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseCPU(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := map[string]struct {
		in   string
		want int64
		ok   bool
	}{
		"bytes":            {"1024", 1024, true},
		"Gi":               {"16Gi", 16 << 30, true},
		"Mi":               {"512Mi", 512 << 20, true},
		"fraction Ti":      {"1.5Ti", 3 << 39, true},
		"decimal G":        {"2G", 2e9, true},
		"k":                {"1k", 1000, true},
		"GB is not a unit": {"16GB", 0, false},
		"lowercase gi":     {"16gi", 0, false},
		"fraction bytes":   {"1.5", 0, false},
		"negative":         {"-1Gi", 0, false},
		"too large":        {"99999999999Pi", 0, false},
		"space":            {"16 Gi", 0, false},
		"empty":            {"", 0, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseBytes(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := map[string]struct {
		in   string
		want time.Duration
		ok   bool
	}{
		"seconds":  {"30s", 30 * time.Second, true},
		"compound": {"1h30m", 90 * time.Minute, true},
		"zero":     {"0", 0, true},
		"negative": {"-5m", 0, false},
		"words":    {"30 seconds", 0, false},
		"days":     {"7d", 0, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}
