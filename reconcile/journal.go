package reconcile

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// The journal is the loop's memory of each workspace kept in the Store
// beside the decision's history (drivers.History.Journal), so that a
// restarted berth, or a replica newly elected leader, continues where the
// last writer stopped: the transitions behind explain and the dashboard's
// timeline, the facts a resume is measured against (it held GPUs, they
// went, the progress it had), and when it left the specs, so the prune
// delay runs on rather than starting over.
//
// It is bounded: each workspace keeps its last journalTransitions
// transitions, and a workspace purged more than PruneDelay ago is left
// out. A journal entry changes only when its workspace does, so a quiet
// cluster rewrites nothing.

// journalTransitions is how many transitions a workspace keeps.
const journalTransitions = 32

// journalEntry is one workspace's journal, as JSON.
type journalEntry struct {
	// History holds its last transitions, oldest first; the last gives
	// its state and since when.
	History []view.Transition `json:"history,omitempty"`
	// WorkLost is the work it lost over all its runs.
	WorkLost time.Duration `json:"workLost,omitempty"`
	// Held, Gone, LastProgress and Resumed are record's fields of the same
	// names. (LastProgress changes each cycle only where the driver
	// reports progress, the simulator; on Nomad it stays zero.)
	Held         bool          `json:"held,omitempty"`
	Gone         bool          `json:"gone,omitempty"`
	LastProgress time.Duration `json:"lastProgress,omitempty"`
	Resumed      string        `json:"resumed,omitempty"`
	// AbsentSince is when it was first seen out of the specs (zero while
	// it is in them); Purged: its job was purged since.
	AbsentSince time.Time `json:"absentSince,omitzero"`
	Purged      bool      `json:"purged,omitempty"`
	// Faults and EndSeen are record's fields of the same names, and
	// LastEnd its status's: a restarted berth counts the node's faults
	// in a row on from where it was.
	Faults  int             `json:"faults,omitempty"`
	EndSeen bool            `json:"endSeen,omitempty"`
	LastEnd *view.EndStatus `json:"lastEnd,omitempty"`
}

// journalSig is what a record's journal encoding was made from.
type journalSig struct {
	transitions            int
	workLost, lastProgress time.Duration
	held, gone, purged     bool
	resumed                string
	absentSince            time.Time
	faults                 int
	endSeen                bool
	lastEnd                *view.EndStatus
}

// journal encodes the loop's memory for the Store at now. The caller
// holds no lock.
func (l *Loop) journal(now time.Time) map[schema.Ref]json.RawMessage {
	out := make(map[schema.Ref]json.RawMessage, len(l.records))
	for ref, rec := range l.records {
		e := journalEntry{WorkLost: rec.status.WorkLost.D(), Held: rec.held, Gone: rec.gone, LastProgress: rec.lastProgress, Resumed: rec.resumed,
			Faults: rec.faults, EndSeen: rec.endSeen, LastEnd: rec.status.LastEnd}
		e.History = rec.history[max(0, len(rec.history)-journalTransitions):]
		if ab := l.absent[ref]; ab != nil {
			e.AbsentSince, e.Purged = ab.since, ab.purged
			if ab.purged && len(e.History) > 0 && now.Sub(e.History[len(e.History)-1].At) > l.cfg.PruneDelay {
				continue // purged long ago: forgotten
			}
		}
		// Transitions are only ever appended: the count and the other
		// fields tell whether the last encoding still holds.
		sig := journalSig{transitions: len(rec.history), workLost: e.WorkLost, held: e.Held, gone: e.Gone,
			lastProgress: e.LastProgress, resumed: e.Resumed, absentSince: e.AbsentSince, purged: e.Purged,
			faults: e.Faults, endSeen: e.EndSeen, lastEnd: e.LastEnd}
		if rec.journal != nil && rec.journalSig == sig {
			out[ref] = rec.journal
			continue
		}
		b, err := json.Marshal(e)
		if err != nil {
			continue // a Transition always encodes
		}
		rec.journal, rec.journalSig = b, sig
		out[ref] = b
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// restore replaces the loop's memory of workspaces with the journal j
// (what the last writer saved), and gives the dashboard's timeline the
// journal's transitions when it has none yet. Entries that do not decode
// are skipped: the workspace starts afresh.
func (l *Loop) restore(j map[schema.Ref]json.RawMessage) {
	records := make(map[schema.Ref]*record, len(j))
	absent := map[schema.Ref]*absence{}
	var all []view.WorkspaceTransition
	for ref, raw := range j {
		var e journalEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			l.log.Warn(ref.String()+": its journal does not decode; starting it afresh", "err", err.Error())
			continue
		}
		rec := &record{history: e.History, held: e.Held, gone: e.Gone, lastProgress: e.LastProgress, resumed: e.Resumed,
			faults: e.Faults, endSeen: e.EndSeen,
			status: view.WorkspaceStatus{Project: ref.Project, Name: ref.Name, WorkLost: view.Seconds(e.WorkLost), LastEnd: e.LastEnd}}
		if n := len(e.History); n > 0 {
			last := e.History[n-1]
			rec.status.State, rec.status.Since, rec.status.Reason = last.To, last.At, last.Reason
			rec.status.PreemptedBy, rec.status.Node, rec.status.GPUs = last.PreemptedBy, last.Node, slices.Clone(last.GPUs)
			rec.status.Progress = last.Progress
		}
		records[ref] = rec
		if !e.AbsentSince.IsZero() {
			absent[ref] = &absence{since: e.AbsentSince, purged: e.Purged}
		}
		for _, t := range e.History {
			all = append(all, view.WorkspaceTransition{Workspace: ref, Transition: t})
		}
	}
	l.records, l.absent = records, absent

	l.feed.mu.Lock()
	empty := len(l.feed.events) == 0
	l.feed.mu.Unlock()
	if !empty || len(all) == 0 {
		return
	}
	sort.SliceStable(all, func(i, k int) bool {
		if !all[i].At.Equal(all[k].At) {
			return all[i].At.Before(all[k].At)
		}
		return all[i].Workspace.Less(all[k].Workspace)
	})
	all = all[max(0, len(all)-l.feed.maxEvents):]
	evs := l.events(all)
	l.feed.mu.Lock()
	defer l.feed.mu.Unlock()
	if len(l.feed.events) == 0 {
		for i := range evs {
			l.feed.evSeq++
			evs[i].Seq = l.feed.evSeq
		}
		l.feed.events = evs
	}
}

// progressKey is LastProgress's key in a journal entry's encoding. No
// other key of the entry, nested or not, is spelled so, and inside a
// string its quotes would be escaped: where it follows "{" or "," it is
// the entry's own field.
var progressKey = []byte(`"lastProgress":`)

// withoutProgress is the encoding e with its lastProgress field left out
// (e itself when it has none): what sameJournalEntry compares first, so
// that an idle cycle decodes no entry whose progress alone moved (the
// simulator's; 58% of BenchmarkOnceFleet's idle cycle decoded them).
func withoutProgress(e []byte) []byte {
	for off := 0; ; {
		i := bytes.Index(e[off:], progressKey)
		if i < 0 {
			return e
		}
		i += off
		if i == 0 || (e[i-1] != ',' && e[i-1] != '{') {
			off = i + len(progressKey)
			continue
		}
		j := i + len(progressKey)
		for j < len(e) && (e[j] == '-' || (e[j] >= '0' && e[j] <= '9')) {
			j++
		}
		if e[i-1] == ',' {
			i-- // the comma before it goes with it
		} else if j < len(e) && e[j] == ',' {
			j++ // first field: the comma after it
		}
		return slices.Concat(e[:i], e[j:])
	}
}

// sameJournalEntry reports whether two encoded journal entries differ at
// most in LastProgress, which grows with the clock wherever the driver
// reports progress (sameHistory: such a change alone waits for the next
// Interval's save).
func sameJournalEntry(x, y json.RawMessage) bool {
	if bytes.Equal(x, y) || bytes.Equal(withoutProgress(x), withoutProgress(y)) {
		return true
	}
	var a, b journalEntry
	if json.Unmarshal(x, &a) != nil || json.Unmarshal(y, &b) != nil {
		return false
	}
	a.LastProgress, b.LastProgress = 0, 0
	return reflect.DeepEqual(a, b)
}
