package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/load"
)

// TestProgressLine: what a terminal shows while a large tree loads.
func TestProgressLine(t *testing.T) {
	var p load.Progress
	if got, want := progressLine(&p), "reading specs: looking for files"; got != want {
		t.Errorf("before the walk: %q, want %q", got, want)
	}
	p.Files.Store(199012)
	p.Read.Store(1204)
	p.Documents.Store(3118)
	if got, want := progressLine(&p), "reading specs: 1,204 of 199,012 files, 3,118 documents"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// lockedBuffer is a strings.Builder safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.WriteString(string(p))
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShowProgress: the line is rewritten in place, and cleared at the
// end so the report starts on a clean line.
func TestShowProgress(t *testing.T) {
	var p load.Progress
	p.Files.Store(3)
	p.Read.Store(2)
	var out lockedBuffer
	stop := showProgress(&out, &p, time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "2 of 3 files") && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	stop()
	got := out.String()
	if !strings.HasPrefix(got, "\r\033[Kreading specs: 2 of 3 files, 0 documents") || !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("progress output %q", got)
	}
}
