package view

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
)

// Explain answers, in sentences, why a workspace is in its state: why it
// is pending and when it is likely to start (counted from now, the
// cluster's time of the status), the GPU kind it asks for, who
// preempted it and why, when it resumed and from what progress, how long
// it is expected to run. It reads only its arguments.
func Explain(ws WorkspaceStatus, history []Transition, now time.Time) []string {
	ref := ws.Ref().String()
	at := func(t time.Time) string { return t.UTC().Format("15:04:05") }
	var out []string
	switch ws.State {
	case StatePending:
		s := ref + " is pending since " + at(ws.Since)
		if ws.Reason != "" {
			s += ": " + ws.Reason
		}
		out = append(out, sentence(s))
		if ws.ReasonKind == "preempting" {
			out = append(out, "It has preempted lower-tier workspaces and starts once they have checkpointed and released their GPUs.")
		}
	case StateStarting:
		s := fmt.Sprintf("%s is starting on %s since %s", ref, placement(ws), at(ws.Since))
		if ws.ReasonKind == ReasonWaiting {
			s += ", and " + ws.Reason
		}
		out = append(out, sentence(s))
	case StateRunning:
		out = append(out, sentence(fmt.Sprintf("%s is running on %s since %s", ref, placement(ws), at(ws.Since))))
	case StatePreempting:
		out = append(out, sentence(fmt.Sprintf("%s is being preempted by %s since %s: %s", ref, byName(ws), at(ws.Since), ws.Reason)))
		out = append(out, "It got its checkpoint signal and keeps its GPUs until it has saved its work or its grace period ends.")
	case StateMoving:
		out = append(out, sentence(fmt.Sprintf("%s is moving since %s: %s", ref, at(ws.Since), strings.TrimPrefix(ws.Reason, "moving: "))))
		out = append(out, "It got its checkpoint signal, as a preempted workspace does, keeps its GPUs until it has saved its work or its grace period ends, then starts again elsewhere from its checkpoint, keeping its place in the queue.")
	case StatePreempted:
		out = append(out, sentence(fmt.Sprintf("%s was preempted by %s at %s: %s", ref, byName(ws), at(ws.Since), ws.Reason)))
		out = append(out, "It keeps its place in the queue and resumes on its own, from its last checkpoint, when capacity returns.")
	case StateStopped:
		s := ref + " is stopped since " + at(ws.Since)
		if ws.Reason != "" {
			s += ": " + ws.Reason
		}
		out = append(out, sentence(s))
	case StateFailed:
		out = append(out, sentence(fmt.Sprintf("%s failed at %s: %s", ref, at(ws.Since), ws.Reason)))
		if !strings.Contains(ws.Reason, "does not run it again") {
			out = append(out, "berth starts it again when the decision allows.")
		}
	case StateCompleted:
		out = append(out, sentence(fmt.Sprintf("%s completed at %s: %s", ref, at(ws.Since), ws.Reason)))
	}
	if ws.GPUKind != "" {
		out = append(out, "It asks for GPUs of kind "+ws.GPUKind+".")
	}
	// The story of its last preemption, when it has resumed since.
	for i := len(history) - 1; i >= 0; i-- {
		t := history[i]
		if t.To != StatePreempting || ws.State == StatePreempting || ws.State == StatePreempted {
			continue
		}
		s := fmt.Sprintf("It was preempted by %s at %s (%s)", refName(t), at(t.At), t.Reason)
		for _, r := range history[i+1:] {
			if r.To == StateStarting || r.To == StateRunning {
				s += fmt.Sprintf(" and resumed at %s from %s of progress", at(r.At), text.Seconds(r.Progress.D()))
				break
			}
		}
		out = append(out, sentence(s))
		break
	}
	if ws.Progress > 0 {
		s := "Progress so far: " + text.Seconds(ws.Progress.D())
		if ws.WorkLost > 0 {
			s += "; work lost to preemptions and failures: " + text.Seconds(ws.WorkLost.D())
		} else {
			s += "; no work lost"
		}
		out = append(out, sentence(s))
	}
	out = append(out, endText(ws.LastEnd, ws.State)...)
	if s := likelyText(ws.LikelyStart, now); s != "" {
		out = append(out, s)
	}
	if s := overdueSentence(ws.LikelyStart, now); s != "" {
		out = append(out, s)
	}
	if s := runTimeText(ws.RunTime); s != "" {
		out = append(out, s)
	}
	if s := useText(ws.GPUUse, ws.GPUs); s != "" {
		out = append(out, s)
	}
	if c := connectText(ws.Endpoints); c != "" {
		out = append(out, "Connect: "+c+".")
	}
	return out
}

// useText says how busy its GPUs are, from the last reading.
func useText(u *GPUUseStatus, gpus []string) string {
	if u == nil {
		return ""
	}
	at := u.At.UTC().Format("15:04:05")
	s := fmt.Sprintf("GPU utilization: %s", Percent(u.MaxPercent))
	if u.GPUs > 1 {
		s = fmt.Sprintf("GPU utilization: %s at most over its %d GPUs, %s on average", Percent(u.MaxPercent), u.GPUs, Percent(u.MeanPercent))
	}
	s += ", read at " + at
	if n := len(gpus) - u.GPUs; n > 0 {
		s += fmt.Sprintf(" (%d of its GPUs report none)", n)
	}
	return s + "."
}

// Percent writes a utilization as people read it: a whole percent,
// "<1%" for a GPU busy less than one percent of the time but not idle.
func Percent(p float64) string {
	if p > 0 && p < 0.5 {
		return "<1%"
	}
	return strconv.Itoa(int(math.Round(p))) + "%"
}

// endText tells how its last run that berth did not stop ended, when it
// failed and it does not run now: whose fault (drivers.EndClass), the
// exit code, restarts, and the last lines its task wrote to stderr.
func endText(e *EndStatus, st State) []string {
	if e == nil || e.Class == drivers.EndCompleted.String() || st == StateRunning || st == StateStarting {
		return nil
	}
	var out []string
	switch e.Class {
	case drivers.EndTaskFailed.String():
		s := "Its last run failed on its own"
		if e.ExitCode != 0 {
			s += fmt.Sprintf(" with exit code %d", e.ExitCode)
		}
		if e.Restarts > 0 {
			s += fmt.Sprintf(" after %d restart(s) in place", e.Restarts)
		}
		if e.Message != "" && e.Message != fmt.Sprintf("Exit Code: %d", e.ExitCode) {
			s += " (" + e.Message + ")"
		}
		out = append(out, sentence(s))
	case drivers.EndNodeFault.String():
		s := "Its last run was ended by its node, not by its task"
		if e.Node != "" {
			s += " (" + e.Node + ")"
		}
		if e.Message != "" {
			s += ": " + e.Message
		}
		if e.Attempts > 1 {
			s += fmt.Sprintf("; %d such ends in a row", e.Attempts)
		}
		out = append(out, sentence(s))
	case drivers.EndTimeLimit.String(), drivers.EndIdle.String():
		what := "at its time limit"
		if e.Class == drivers.EndIdle.String() {
			what = "because its GPUs stayed idle"
		}
		s := "berth stopped it " + what + " at " + e.At.UTC().Format(time.RFC3339) + ", with its checkpoint grace"
		if e.RanFor > 0 {
			s += ", after a run of " + e.RanFor.D().String()
		}
		out = append(out, sentence(s))
	}
	if e.Stderr != "" {
		out = append(out, "The last lines it wrote to stderr:\n"+e.Stderr)
	}
	return out
}

func placement(ws WorkspaceStatus) string {
	if ws.Node == "" {
		return "its node"
	}
	if len(ws.GPUs) == 0 {
		return ws.Node // work without GPUs
	}
	return fmt.Sprintf("%s (GPUs %s)", ws.Node, strings.Join(drivers.ShortGPUs(ws.GPUs), ", "))
}

func byName(ws WorkspaceStatus) string {
	if ws.PreemptedBy == nil {
		return "a higher tier"
	}
	return ws.PreemptedBy.String()
}

func refName(t Transition) string {
	if t.PreemptedBy == nil {
		return "a higher tier"
	}
	return t.PreemptedBy.String()
}

func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// likelyText says when a waiting workspace is likely to start, as a
// sentence; empty without an estimate.
func likelyText(l *LikelyStart, now time.Time) string {
	if l == nil {
		return ""
	}
	if !l.Known {
		return sentence("Likely start " + l.estimate(now))
	}
	return sentence("Likely start: " + l.estimate(now))
}

// overdueSentence says what the wait bound does for a waiting
// workspace; empty with the bound off.
func overdueSentence(l *LikelyStart, now time.Time) string {
	if l == nil || l.OverdueAt.IsZero() {
		return ""
	}
	const does = "the starvation guard holds GPUs for it ahead of borrowers and, while it fits inside its quota, of its own team's work, of its tier and lower, after any workspace overdue before it; other work inside a quota still goes first"
	at := l.OverdueAt.UTC().Format("2006-01-02 15:04:05")
	if now.Before(l.OverdueAt) {
		return sentence(fmt.Sprintf("The wait bound (aging.maxWait) makes it overdue at %s, in %s: from then %s", at, text.RoughDuration(l.OverdueAt.Sub(now)), does))
	}
	return sentence(fmt.Sprintf("It is overdue since %s (past aging.maxWait): %s", at, does))
}

// runTimeText says a workspace's predicted run time, as a sentence;
// empty when none is known.
func runTimeText(r *RunTimeStatus) string {
	if r == nil {
		return ""
	}
	var rng string
	if lo, hi := text.RoughDuration(r.Low.D()), text.RoughDuration(r.High.D()); lo != hi {
		rng = " (" + lo + "–" + hi + ")"
	}
	med := text.RoughDuration(r.Median.D())
	switch {
	case r.PastRuns > 0 && r.Stated > 0:
		return sentence(fmt.Sprintf("Expected run time: %s%s: its expectedDuration, with the spread of %s (%s)", med, rng, r.Basis, text.Plural(r.PastRuns, "past run")))
	case r.PastRuns > 0:
		return sentence(fmt.Sprintf("Expected run time: %s%s, from %s (%s)", med, rng, r.Basis, text.Plural(r.PastRuns, "past run")))
	}
	return sentence(fmt.Sprintf("Expected run time: %s, its expectedDuration (no completed run to compare)", med))
}

// Endpoint is where one port of one replica of a workspace is
// reachable, taken from the allocation the cluster placed (so it follows
// the workspace to another node after a preemption and a resume).
// Address is "host:port", or a URL when the port has a scheme.
type Endpoint struct {
	Replica int    `json:"replica"`
	Label   string `json:"label"`
	Address string `json:"address"`
}

// connectText writes endpoints for a person: "http at
// http://10.0.0.5:24301/" or, for a gang, "replica 0 http at …; replica
// 1 http at …"; "" when there are none.
func connectText(eps []Endpoint) string {
	gang := false
	for _, e := range eps {
		gang = gang || e.Replica != eps[0].Replica
	}
	var parts []string
	for _, e := range eps {
		s := e.Label + " at " + e.Address
		if gang {
			s = "replica " + strconv.Itoa(e.Replica) + " " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
