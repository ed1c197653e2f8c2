package nomad

import (
	"net/http"
	"testing"
	"time"
)

// TestBlockingWait: a blocking query's deadline is its wait on top of
// the request timeout; a plain request has none.
func TestBlockingWait(t *testing.T) {
	tests := map[string]struct {
		query string
		want  time.Duration
		ok    bool
	}{
		"plain":         {"", 0, false},
		"index 0":       {"index=0&wait=10000ms", 0, false},
		"api's wait":    {"index=7&wait=10000ms", 10 * time.Second, true},
		"Nomad default": {"index=7", 5 * time.Minute, true},
		"garbage wait":  {"index=7&wait=soon", 5 * time.Minute, true},
		"namespace too": {"namespace=x&index=9&wait=2s", 2 * time.Second, true},
		"garbage index": {"index=x&wait=2s", 0, false},
	}
	for name, tt := range tests {
		req, _ := http.NewRequest("GET", "http://nomad/v1/job/x/allocations?"+tt.query, nil)
		got, ok := blockingWait(req)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: blockingWait = %s, %v; want %s, %v", name, got, ok, tt.want, tt.ok)
		}
	}
}
