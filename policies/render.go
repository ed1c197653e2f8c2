package policies

import (
	"fmt"
	"strings"
)

// Render writes a decision as text a person reads: one block per
// workspace, in the decision's order (by Ref). berth plan and explain and
// the golden scenarios use it.
//
//	high-priority-project/notebook  start
//	    replica 0 on gpu-1 [g0]
//	    once gone: medium-priority-project/train
//	    why: starts after preempting medium-priority-project/train
func Render(d Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision at %s\n", stamp(d.Now))
	for _, w := range d.Workspaces {
		b.WriteString(RenderWorkspace(w))
	}
	return b.String()
}

// RenderWorkspace writes one workspace's block of Render.
func RenderWorkspace(w WorkspaceDecision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s\n", w.Ref, w.Verdict)
	for _, p := range w.Placements {
		fmt.Fprintf(&b, "    replica %d on %s [%s]\n", p.Replica, p.Node, strings.Join(p.GPUs, " "))
	}
	if len(w.Preempts) > 0 {
		refs := make([]string, len(w.Preempts))
		for i, r := range w.Preempts {
			refs[i] = r.String()
		}
		fmt.Fprintf(&b, "    once gone: %s\n", strings.Join(refs, ", "))
	}
	if w.PreemptedBy != nil {
		if w.Right != RightNone {
			fmt.Fprintf(&b, "    preempted by %s (%s)\n", w.PreemptedBy, w.Right)
		} else {
			fmt.Fprintf(&b, "    preempted by %s\n", w.PreemptedBy)
		}
	}
	if w.Reason.Message != "" {
		fmt.Fprintf(&b, "    why: %s\n", w.Reason.Message)
	}
	return b.String()
}
