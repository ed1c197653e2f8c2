package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
)

// GitHubCommentLimit is the most characters a GitHub comment holds.
const GitHubCommentLimit = 65535

// MarkdownSplit separates the comments of a markdown plan too long for
// one (Markdown's parts, as `berth plan --output markdown` prints them).
const MarkdownSplit = "\n<!-- berth plan: next comment -->\n"

// SummaryLine is the report in one line; counts that are zero are left
// out.
func (r Report) SummaryLine() string {
	s := r.Summary
	var parts []string
	add := func(n int, text string) {
		if n > 0 {
			parts = append(parts, text)
		}
	}
	add(s.SpecChanges, text.Plural(s.SpecChanges, "spec change"))
	add(s.Start, fmt.Sprintf("%d to start", s.Start))
	add(s.Preempt, fmt.Sprintf("%d to preempt", s.Preempt))
	add(s.Stop+s.Purge, fmt.Sprintf("%d to stop", s.Stop+s.Purge))
	add(s.Update, fmt.Sprintf("%d to update", s.Update))
	add(s.Wait, fmt.Sprintf("%d waiting", s.Wait))
	add(len(r.Warnings), text.Plural(len(r.Warnings), "warning"))
	line := strings.Join(parts, ", ")
	switch {
	case !s.Changes() && line == "":
		return "no changes: the cluster already matches these specs"
	case !s.Changes():
		return "no changes (" + line + ")"
	}
	return line
}

// header names what is compared and where.
func (r Report) header() string {
	base := r.Base
	if base == "" {
		base = "(none)"
	}
	return fmt.Sprintf("specs %s → %s on %s (observed %s)", base, r.Head, r.Cluster, r.ObservedAt.UTC().Format(time.RFC3339))
}

// Line renders one consequence as a sentence.
func (c Consequence) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %s", c.Kind, c.Workspace)
	switch c.Kind {
	case "start":
		fmt.Fprintf(&b, " on %s [%s]", c.Node, strings.Join(drivers.ShortGPUs(c.GPUs), " "))
		if len(c.After) > 0 {
			fmt.Fprintf(&b, " once %s stopped", strings.Join(c.After, ", "))
		}
	case "preempt":
		if c.By != nil {
			fmt.Fprintf(&b, " by %s", c.By)
		}
		if c.Node != "" {
			fmt.Fprintf(&b, " on %s", c.Node)
		}
		fmt.Fprintf(&b, ", %s of work since its last checkpoint at risk", text.Duration(c.AtRisk))
	case "stop", "purge", "update", "limit":
		if c.Node != "" {
			fmt.Fprintf(&b, " on %s", c.Node)
		}
	}
	if c.Reason != "" {
		b.WriteString(": " + c.Reason)
	}
	return b.String()
}

// Text renders the report for a terminal.
func (r Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "berth plan: %s\n%s\n", r.SummaryLine(), r.header())
	if len(r.Tiers) > 0 {
		b.WriteString("\ntiers:\n")
		for _, t := range r.Tiers {
			fmt.Fprintf(&b, "  ~ %s\n", t)
		}
	}
	for _, p := range r.Projects {
		fmt.Fprintf(&b, "\nproject %s (%s)\n", p.Name, p.Change)
		for _, c := range p.Changes {
			fmt.Fprintf(&b, "  ~ %s\n", c)
		}
		for _, w := range p.Workspaces {
			fmt.Fprintf(&b, "  %s workspace %s", changeMark(w.Change), w.Name)
			if len(w.Details) > 0 {
				fmt.Fprintf(&b, ": %s", strings.Join(w.Details, "; "))
			}
			b.WriteByte('\n')
		}
		for _, c := range p.Consequences {
			fmt.Fprintf(&b, "  → %s\n", c.Line())
		}
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\nwarnings:\n")
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "  ! %s\n", w)
		}
	}
	return b.String()
}

func changeMark(change string) string {
	switch change {
	case "added":
		return "+"
	case "removed":
		return "-"
	}
	return "~"
}

// Markdown renders the report as pull-request comments in the style of
// Atlantis: a one-line summary, a table of consequences, each project's
// details in a collapsible block. A report longer than limit characters
// (GitHubCommentLimit when limit <= 0) is split between projects (and a
// project's lines, when one alone is too long) into several comments,
// each under limit and saying which part it is.
func (r Report) Markdown(limit int) []string {
	if limit <= 0 {
		limit = GitHubCommentLimit
	}
	var head strings.Builder
	fmt.Fprintf(&head, "### berth plan: %s\n\n", r.SummaryLine())
	fmt.Fprintf(&head, "`%s`\n\n", r.header())
	for _, w := range r.Warnings {
		fmt.Fprintf(&head, "> [!WARNING]\n> %s\n\n", mdEscape(w))
	}
	var blocks []string
	var rows []string
	for _, p := range r.Projects {
		for _, c := range p.Consequences {
			rows = append(rows, consequenceRow(c))
		}
	}
	if len(rows) > 0 {
		blocks = append(blocks, "| workspace | consequence | where / by whom | work at risk | why |\n|---|---|---|---|---|\n")
		blocks = append(blocks, rows...)
		blocks[len(blocks)-1] += "\n"
	}
	if len(r.Tiers) > 0 {
		var b strings.Builder
		b.WriteString("<details><summary>tiers</summary>\n\n```diff\n")
		for _, t := range r.Tiers {
			fmt.Fprintf(&b, "~ %s\n", t)
		}
		b.WriteString("```\n</details>\n")
		blocks = append(blocks, b.String())
	}
	for _, p := range r.Projects {
		lines := projectLines(p)
		summary := fmt.Sprintf("<details><summary>project <b>%s</b> (%s)</summary>\n\n```diff\n", mdEscape(p.Name), p.Change)
		// A project too long for one comment is cut into several blocks.
		budget := limit/2 - len(summary) - 32
		var b strings.Builder
		for _, l := range lines {
			if b.Len() > 0 && b.Len()+len(l) > budget {
				blocks = append(blocks, summary+b.String()+"```\n</details>\n\n")
				b.Reset()
			}
			if len(l) > budget {
				l = l[:budget] + "…\n"
			}
			b.WriteString(l)
		}
		blocks = append(blocks, summary+b.String()+"```\n</details>\n\n")
	}
	return packComments(head.String(), blocks, limit)
}

func projectLines(p ProjectReport) []string {
	var lines []string
	for _, c := range p.Changes {
		lines = append(lines, "~ "+c+"\n")
	}
	for _, w := range p.Workspaces {
		l := changeMark(w.Change) + " workspace " + w.Name
		if len(w.Details) > 0 {
			l += ": " + strings.Join(w.Details, "; ")
		}
		lines = append(lines, l+"\n")
	}
	for _, c := range p.Consequences {
		lines = append(lines, "  "+c.Line()+"\n")
	}
	return lines
}

func consequenceRow(c Consequence) string {
	where := ""
	switch c.Kind {
	case "start":
		where = fmt.Sprintf("%s [%s]", c.Node, strings.Join(drivers.ShortGPUs(c.GPUs), " "))
		if len(c.After) > 0 {
			where += " once " + strings.Join(c.After, ", ") + " stopped"
		}
	case "preempt":
		if c.By != nil {
			where = "by " + c.By.String()
		}
	case "wait":
		if c.By != nil {
			where = "preempted by " + c.By.String()
		}
	default:
		where = c.Node
	}
	risk := ""
	if c.Kind == "preempt" || c.Restarts {
		risk = text.Duration(c.AtRisk)
	}
	return fmt.Sprintf("| `%s` | %s | %s | %s | %s |\n", c.Workspace, c.Kind, mdEscape(where), risk, mdEscape(c.Reason))
}

// packComments fills comments with blocks in order, each under limit.
func packComments(head string, blocks []string, limit int) []string {
	var parts []string
	cur := head
	for _, b := range blocks {
		if len(cur)+len(b) > limit-64 && cur != head {
			parts = append(parts, cur)
			cur = ""
		}
		cur += b
	}
	parts = append(parts, cur)
	if len(parts) > 1 {
		for i := range parts {
			parts[i] = fmt.Sprintf("<sub>berth plan, comment %d of %d</sub>\n\n", i+1, len(parts)) + parts[i]
		}
	}
	return parts
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "\n", " ").Replace(s)
}
