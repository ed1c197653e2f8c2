package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/source/git"
	"github.com/spf13/cobra"
)

func newPlanCmd() *cobra.Command {
	var (
		cluster, base, output string
		cacheDir              string
		detailed, allowMass   bool
		pruneDelay            time.Duration
		percent, minimum      int
		lf                    limitFlags
	)
	cmd := &cobra.Command{
		Use:   "plan [PATH] --cluster CLUSTER [--base REF] [--output text|markdown|json] [--detailed-exitcode]",
		Short: "Show what a change to the specs would do to the live cluster (read-only)",
		Long: `plan compares the specs under PATH (default .) with the same directory at
git revision --base (default HEAD when PATH is in a git repository) and
shows, per project, what changed — tiers, quotas, weights, members,
workspaces added, removed or changed — and what berth would do about it on
the cluster as observed now: which workspaces start and where, which are
preempted, by whom, with how much work since their last checkpoint at
risk, which keep waiting and why, which are stopped and scheduled for
purge. Warnings say what a reviewer must know: a mass prune berth would
refuse, Nomad's native preemption left on, tiers closer than 10 apart.

What berth would do is what berth reconcile does: plan runs one cycle of
the reconcile loop itself, dry, on the cluster as observed and the
history berth keeps there, applying nothing. plan never writes to the
cluster. --cluster snapshot:FILE plans against a file written by berth
snapshot, for CI without cluster credentials.

--output markdown is a pull-request comment (a one-line summary, a table,
details in collapsible blocks); a plan longer than GitHub's 65,535
characters is split into several comments separated by the line
"<!-- berth plan: next comment -->". --output json is versioned
("version": "` + plan.PlanVersion + `").

Exit status: 0 success, 1 error (invalid specs, cluster unreachable, bad
--base), 2 a wrong command line; with --detailed-exitcode: 0 no changes,
1 error, 2 changes (terraform's convention).

` + limitsHelp + `

` + clusterHelp(),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			limits, err := lf.limits()
			if err == nil {
				err = runPlan(cmd, args, planOptions{cluster: cluster, base: base, baseSet: cmd.Flags().Changed("base"),
					cacheDir: cacheDir, output: output, allowMass: allowMass, pruneDelay: pruneDelay, percent: percent, minimum: minimum, limits: limits})
			}
			var changed errChanges
			switch {
			case errors.As(err, &changed):
				if detailed {
					return &exitError{Code: 2}
				}
				return nil
			case err != nil && detailed:
				// terraform's convention: 2 means changes, so any error is 1.
				var ue *usageError
				if errors.As(err, &ue) {
					return &exitError{Code: exitFailure, Err: ue}
				}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cluster, "cluster", "", "the cluster to plan against, read-only (see below)")
	fl.StringVar(&base, "base", "HEAD", "git revision to compare the specs with (a branch, tag, commit, origin/main)")
	fl.StringVarP(&output, "output", "o", "text", "text, markdown or json")
	fl.BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when nothing changes, 2 when something does, 1 on errors")
	fl.BoolVar(&allowMass, "allow-mass-prune", false, "plan as berth reconcile --allow-mass-prune would apply")
	fl.IntVar(&percent, "mass-prune-percent", 25, "berth reconcile's --mass-prune-percent")
	fl.IntVar(&minimum, "mass-prune-min", 3, "berth reconcile's --mass-prune-min")
	fl.DurationVar(&pruneDelay, "prune-delay", plan.DefaultPruneDelay, "berth reconcile's --prune-delay, for the purge times shown")
	fl.StringVar(&cacheDir, "cache-dir", defaultCacheDir(), "where plan keeps what it learned for its next run, as berth apply does (the same files): each spec file's hash and validated documents, and on Nomad what it read of each job's current version; the specs at --base are validated through the same documents, so a file the change left alone is validated once; \"\" keeps nothing")
	lf.add(fl)
	return cmd
}

type planOptions struct {
	cluster, base, output string
	cacheDir              string
	baseSet, allowMass    bool
	pruneDelay            time.Duration
	percent, minimum      int
	limits                load.Limits
}

// errChanges says the plan has changes (for --detailed-exitcode).
type errChanges struct{}

func (errChanges) Error() string { return "the plan has changes" }

func runPlan(cmd *cobra.Command, args []string, o planOptions) error {
	switch o.output {
	case "text", "markdown", "json":
	default:
		return usagef("--output %q: want text, markdown or json", o.output)
	}
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	log, err := newLogger(cmd.ErrOrStderr(), "text", "error")
	if err != nil {
		return err
	}
	// 1. The specs after the change: the directory as it is, through the
	// spec cache, which is saved as this side leaves it (what the next run
	// reads), valid or not.
	specs, save := openSpecCache(o.cacheDir, dir, o.limits, log)
	rev, err := specs.Source.Read(cmd.Context())
	if err != nil {
		return &exitError{Code: exitFailure, Err: err}
	}
	head, err := loadPlanSpecs(cmd.ErrOrStderr(), dir, specs.Load, rev.FS, rev.ID)
	save() // invalid specs too: the next run validates only what is fixed
	if err != nil {
		return err
	}
	in := plan.PlanInput{Head: head, HeadName: dir + "@" + rev.ID, AllowMassPrune: o.allowMass, PruneDelay: o.pruneDelay,
		MassPrunePercent: o.percent, MassPruneMin: o.minimum}

	// 2. The specs before: the same directory at --base, through the same
	// documents (a file the change did not touch is not validated again).
	if o.baseSet || git.InWorkTree(dir) {
		fsys, id, err := git.RevisionFS(dir, o.base, o.limits)
		if err != nil {
			return &exitError{Code: exitFailure, Err: fmt.Errorf("--base %s: %w", o.base, err)}
		}
		in.Base, err = loadPlanSpecs(cmd.ErrOrStderr(), dir+" at "+o.base, specs.Load, fsys, id)
		var ee *exitError
		if errors.As(err, &ee) && ee.Err == nil {
			// The base is invalid: plan without spec changes.
			fmt.Fprintf(cmd.ErrOrStderr(), "planning without spec changes against %s\n", o.base)
			in.Base, err = nil, nil
		}
		if err != nil {
			return err
		}
		if in.Base != nil {
			in.BaseName = o.base + "@" + id
		}
	}

	// 3. The cluster, observed once, read-only.
	c, err := openCluster(cmd.Context(), o.cluster, clusterOptions{SimSpeed: 1, Logger: log})
	if err != nil {
		return err
	}
	if c.Close != nil {
		defer c.Close()
	}
	saveVersions := openVersionMemo(o.cacheDir, c, log)
	doc, err := observeDoc(cmd.Context(), c)
	if err != nil {
		return &exitError{Code: exitFailure, Err: err}
	}
	saveVersions()
	in.Cluster, in.Snapshot, in.NativePreemption = c.Name, &doc.Snapshot, doc.NativePreemption

	// 4. What the loop's cycle does on the head, run dry: the report
	// says what berth reconcile would do because it runs the same cycle.
	dry, err := reconcile.DryRun(cmd.Context(), reconcile.DryRunInput{Set: head, Snapshot: doc.Snapshot, History: doc.History})
	if err != nil {
		return &exitError{Code: exitFailure, Err: err}
	}
	in.Decision, in.Plan, in.History = dry.Decision, dry.Result.Plan, &dry.History

	// 5. Report.
	r := plan.NewReport(in)
	r.Warnings = append(r.Warnings, doc.Notes...)
	out := cmd.OutOrStdout()
	switch o.output {
	case "text":
		io.WriteString(out, r.Text())
	case "markdown":
		for i, part := range r.Markdown(0) {
			if i > 0 {
				io.WriteString(out, plan.MarkdownSplit)
			}
			io.WriteString(out, part)
		}
	case "json":
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return &exitError{Code: exitFailure, Err: err}
		}
		out.Write(append(b, '\n'))
	}
	if r.Summary.Changes() {
		return errChanges{}
	}
	return nil
}

// loadPlanSpecs loads and validates one side of the comparison; invalid
// specs are an error with every problem listed.
func loadPlanSpecs(stderr io.Writer, what string, load source.LoadFunc, fsys fs.FS, id string) (*schema.Set, error) {
	set, problems, err := load(fsys, ".")
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: fmt.Errorf("%s: %w", what, err)}
	}
	if set == nil {
		fmt.Fprintf(stderr, "the specs in %s are invalid; no plan:\n", what)
		for _, p := range problems {
			fmt.Fprintln(stderr, "  "+p)
		}
		return nil, &exitError{Code: exitFailure}
	}
	set.Revision = id
	return set, nil
}
