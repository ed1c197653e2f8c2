package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/schema"
	"github.com/spf13/cobra"
)

// validateJSONVersion is the version of `berth validate --format json`'s
// output; it changes only when a field changes meaning or goes away.
const validateJSONVersion = 1

func newValidateCmd() *cobra.Command {
	var (
		format string
		strict bool
		lf     limitFlags
	)
	cmd := &cobra.Command{
		Use:   "validate [PATH...]",
		Short: "Validate a tree of specs (for CI)",
		Long: `validate reads every *.yaml and *.yml file under each PATH (default: the
current directory), checks each document against berth's schema, checks the
rules that span documents and the repo's own *.cue rules, and reports every
problem at once, sorted by file and line.

A tree with no tier, project or workspace at all is an error, not a valid
empty tree: berth apply and berth reconcile refuse it, and a CI job pointed
at the wrong directory must fail.

What is read: only regular files inside each directory. A symbolic link is
followed only to a regular file inside the directory; a link out of it, a
link to a directory, a loop, a FIFO or a device is an error that names it,
and is never opened. On a terminal, the files read and the documents found
so far are shown on stderr every second.

` + limitsHelp + `

A warning does not make the specs invalid, but says that something is
likely wrong: among them, an env value that looks like a credential (a
Hugging Face, GitHub, GitLab, Slack or API token, an AWS access key, a long
random string, or a value under a name such as WANDB_API_KEY), which git
keeps for anyone who can read it. The value itself is never printed.
--strict makes every warning an error.

Exit status: 0 when the specs are valid (warnings allowed, unless
--strict), 1 when they are not or when there are none, 2 when the command
line is wrong (a PATH that does not exist).

Formats:
  text     one problem per line, then a summary line
  json     {"version": 1, "valid": ..., "summary": {...}, "diagnostics": [...]}
  github   GitHub Actions annotations; with GITHUB_STEP_SUMMARY set, also a
           markdown summary appended to that file`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case "text", "json", "github":
			default:
				return usagef("--format %q: want text, json or github", format)
			}
			if len(args) == 0 {
				args = []string{"."}
			}
			for _, a := range args {
				if _, err := os.Stat(a); err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return usagef("%s: no such file or directory (looked for %s); give the directory that holds the specs", a, absPath(a))
					}
					return &exitError{Code: exitFailure, Err: err}
				}
			}
			limits, err := lf.limits()
			if err != nil {
				return err
			}
			opts := load.Options{Limits: limits}
			tuneGC()
			stderr := cmd.ErrOrStderr()
			if isTerminal(stderr) {
				opts.Progress = &load.Progress{}
				stop := showProgress(stderr, opts.Progress, time.Second)
				defer stop()
			}
			r, err := load.CheckWith(opts, args...)
			if err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			if d, ok := noSpecs(args, r); ok {
				r.Diagnostics = append(r.Diagnostics, d)
			}
			if strict {
				for i := range r.Diagnostics {
					r.Diagnostics[i].Severity = load.SeverityError
				}
			}
			out := cmd.OutOrStdout()
			switch format {
			case "text":
				writeText(out, r)
			case "json":
				if err := writeJSON(out, r); err != nil {
					return &exitError{Code: exitFailure, Err: err}
				}
			case "github":
				writeGitHub(out, r)
				if path := os.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
					if err := appendStepSummary(path, r); err != nil {
						return &exitError{Code: exitFailure, Err: fmt.Errorf("write GITHUB_STEP_SUMMARY: %w", err)}
					}
				}
			}
			if r.Diagnostics.HasErrors() {
				return &exitError{Code: exitFailure}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, json or github")
	cmd.Flags().BoolVar(&strict, "strict", false, "warnings are errors: an env value that looks like a credential, tiers closer than 10, quotas past the cluster all fail the check")
	lf.add(cmd.Flags())
	return cmd
}

// noSpecs is the error of a check that found nothing to check: no
// error, and not one tier, project or workspace under any of paths.
func noSpecs(paths []string, r *load.Report) (load.Diagnostic, bool) {
	s := r.Summary
	if r.Diagnostics.HasErrors() || s.Tiers+s.Projects+s.Workspaces > 0 {
		return load.Diagnostic{}, false
	}
	abs := make([]string, len(paths))
	for i, p := range paths {
		abs[i] = absPath(p)
	}
	holds, has := "holds", "has"
	if len(abs) > 1 {
		holds, has = "together hold", "together have"
	}
	what := holds + " no *.yaml or *.yml file"
	if s.Files > 0 {
		what = has + " " + text.Plural(s.Files, "YAML file") + " but no document of kind PriorityTier, Project or Workspace"
	}
	where := strings.Join(abs, ", ")
	return load.Diagnostic{
		Pos:      schema.Pos{File: strings.Join(paths, ", ")},
		Severity: load.SeverityError,
		Message:  fmt.Sprintf("no berth specs found: %s %s; give the directory that holds the specs", where, what),
	}, true
}

// absPath is p made absolute for a message; p itself if that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// summaryLine is "3 tiers, 4 projects, 12 workspaces: 2 errors, 1 warning",
// with ", 2 GPU kinds" and ", 1 notification" after the workspaces where
// the specs declare any.
func summaryLine(r *load.Report) string {
	s := r.Summary
	counts := fmt.Sprintf("%s, %s, %s", text.Plural(s.Tiers, "tier"), text.Plural(s.Projects, "project"), text.Plural(s.Workspaces, "workspace"))
	if s.Kinds > 0 {
		counts += ", " + text.Plural(s.Kinds, "GPU kind")
	}
	if s.Notifications > 0 {
		counts += ", " + text.Plural(s.Notifications, "notification")
	}
	errs, warns := r.Diagnostics.Errors(), r.Diagnostics.Warnings()
	switch {
	case errs == 0 && warns == 0:
		return counts + ": valid"
	case errs == 0:
		return counts + ": valid, " + text.Plural(warns, "warning")
	}
	return counts + ": " + text.Plural(errs, "error") + ", " + text.Plural(warns, "warning")
}

func writeText(w io.Writer, r *load.Report) {
	for _, d := range r.Diagnostics {
		fmt.Fprintln(w, d.String())
	}
	fmt.Fprintln(w, summaryLine(r))
}

type jsonDiagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line,omitempty"`
	Col      int    `json:"col,omitempty"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

type jsonReport struct {
	Version     int              `json:"version"`
	Valid       bool             `json:"valid"`
	Summary     load.Summary     `json:"summary"`
	Errors      int              `json:"errors"`
	Warnings    int              `json:"warnings"`
	Diagnostics []jsonDiagnostic `json:"diagnostics"`
}

func writeJSON(w io.Writer, r *load.Report) error {
	out := jsonReport{
		Version:     validateJSONVersion,
		Valid:       !r.Diagnostics.HasErrors(),
		Summary:     r.Summary,
		Errors:      r.Diagnostics.Errors(),
		Warnings:    r.Diagnostics.Warnings(),
		Diagnostics: []jsonDiagnostic{},
	}
	for _, d := range r.Diagnostics {
		out.Diagnostics = append(out.Diagnostics, jsonDiagnostic{
			File: d.Pos.File, Line: d.Pos.Line, Col: d.Pos.Col,
			Severity: d.Severity.String(), Message: d.Message,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// GitHub workflow commands escape %, CR and LF in messages, and also ':'
// and ',' in properties.
var (
	ghData     = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	ghProperty = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
)

func writeGitHub(w io.Writer, r *load.Report) {
	for _, d := range r.Diagnostics {
		props := []string{"file=" + ghProperty.Replace(d.Pos.File)}
		if d.Pos.Line > 0 {
			props = append(props, fmt.Sprintf("line=%d", d.Pos.Line))
		}
		if d.Pos.Col > 0 {
			props = append(props, fmt.Sprintf("col=%d", d.Pos.Col))
		}
		props = append(props, "title="+ghProperty.Replace("berth validate"))
		fmt.Fprintf(w, "::%s %s::%s\n", d.Severity, strings.Join(props, ","), ghData.Replace(d.Message))
	}
	fmt.Fprintln(w, summaryLine(r))
}

func appendStepSummary(path string, r *load.Report) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var b strings.Builder
	icon := "✅"
	if r.Diagnostics.HasErrors() {
		icon = "❌"
	}
	fmt.Fprintf(&b, "### %s berth validate\n\n%s\n", icon, summaryLine(r))
	if len(r.Diagnostics) > 0 {
		b.WriteString("\n| | Where | Problem |\n|---|---|---|\n")
		for _, d := range r.Diagnostics {
			mark := "error"
			if d.Severity == load.SeverityWarning {
				mark = "warning"
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s |\n", mark, d.Pos, mdCell(d.Message))
		}
	}
	b.WriteString("\n")
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", "<br>").Replace(s)
}

// showProgress writes progressLine(p) to w every interval, over itself,
// until the returned stop is called, which clears the line.
func showProgress(w io.Writer, p *load.Progress, every time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		shown := false
		for {
			select {
			case <-done:
				if shown {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				fmt.Fprint(w, "\r\033[K"+progressLine(p))
				shown = true
			}
		}
	}()
	return func() { close(done); <-finished }
}

// progressLine is "reading specs: 1,204 of 199,012 files, 3,118
// documents".
func progressLine(p *load.Progress) string {
	files, read, docs := p.Files.Load(), p.Read.Load(), p.Documents.Load()
	if files == 0 {
		return "reading specs: looking for files"
	}
	return fmt.Sprintf("reading specs: %s of %s files, %s documents", thousands(read), thousands(files), thousands(docs))
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// tuneGC trades memory for time in a short-lived validate: CUE allocates
// ~150 KB per document that dies at once, so collecting less often saves
// about a fifth of the CPU; 10,000 files peak under 300 MiB. GOGC in the
// environment wins. (No memory limit: with rule files the live heap grows
// with the repo, and a limit below it would make the collector thrash.)
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(300)
}
