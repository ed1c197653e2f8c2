package view

import (
	"strings"
	"testing"
	"time"
)

// TestOverdueText: the wait bound's clause and sentence, before and
// after a workspace is overdue, and none with the bound off.
func TestOverdueText(t *testing.T) {
	at := time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC)
	l := &LikelyStart{Known: true, Earliest: at.Add(-2 * time.Hour), Likely: at.Add(-2 * time.Hour), Latest: at.Add(-2 * time.Hour), Stated: 1, OverdueAt: at}
	for _, tc := range []struct {
		now           time.Time
		text, explain string
	}{
		{at.Add(-51 * time.Hour), "in 49h (from 1 stated duration); overdue in 51h", "The wait bound (aging.maxWait) makes it overdue at 2026-03-05 09:00:00, in 51h: from then the starvation guard holds GPUs"},
		{at.Add(time.Hour), "now: the GPUs it needs are free; overdue", "It is overdue since 2026-03-05 09:00:00 (past aging.maxWait): the starvation guard holds GPUs"},
	} {
		if got := l.Text(tc.now); got != tc.text {
			t.Errorf("at %v: %q, want %q", tc.now, got, tc.text)
		}
		if got := overdueSentence(l, tc.now); !strings.HasPrefix(got, tc.explain) {
			t.Errorf("at %v: explain %q, want it to start %q", tc.now, got, tc.explain)
		}
	}
	off := *l
	off.OverdueAt = time.Time{}
	if got := off.Text(at); strings.Contains(got, "overdue") || overdueSentence(&off, at) != "" {
		t.Errorf("bound off: %q, %q", got, overdueSentence(&off, at))
	}
}
