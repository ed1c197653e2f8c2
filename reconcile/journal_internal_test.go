package reconcile

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-dev/berth/view"
)

// TestSameJournalEntryFastPath: entries that differ in LastProgress alone
// are the same, whether the fast path or the decode decides; any other
// difference is seen, a reason that spells the key included.
func TestSameJournalEntryFastPath(t *testing.T) {
	enc := func(e journalEntry) json.RawMessage {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := journalEntry{History: []view.Transition{{At: at, To: view.StateRunning, Reason: `said "lastProgress":5`}}, Held: true, LastProgress: time.Minute}
	for name, tc := range map[string]struct {
		b    journalEntry
		want bool
	}{
		"progress only":       {journalEntry{History: base.History, Held: true, LastProgress: time.Hour}, true},
		"progress gone":       {journalEntry{History: base.History, Held: true}, true},
		"held differs":        {journalEntry{History: base.History, LastProgress: time.Minute}, false},
		"reason differs":      {journalEntry{History: []view.Transition{{At: at, To: view.StateRunning, Reason: `said "lastProgress":6`}}, Held: true, LastProgress: time.Minute}, false},
		"progress and resume": {journalEntry{History: base.History, Held: true, LastProgress: time.Hour, Resumed: "x"}, false},
	} {
		if got := sameJournalEntry(enc(base), enc(tc.b)); got != tc.want {
			t.Errorf("%s: sameJournalEntry = %v, want %v", name, got, tc.want)
		}
		if got := string(withoutProgress(enc(tc.b))); tc.want && got != string(withoutProgress(enc(base))) {
			t.Errorf("%s: the fast path did not decide: %s", name, got)
		}
	}
}
