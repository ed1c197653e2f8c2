package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/schema"
	"github.com/spf13/cobra"
)

func newDoctorCmd() *cobra.Command {
	var cluster string
	var fix, strict bool
	var specs string
	cmd := &cobra.Command{
		Use:   "doctor --cluster nomad [--fix] [--strict]",
		Short: "Check that a Nomad cluster is set up for berth",
		Long: `doctor reads a Nomad cluster and reports what stands in berth's way:
Nomad's native preemption (it evicts whole allocations of jobs 10 or more
priority points lower, without checkpoint grace, quotas or berth's choice of
victims) and evictions it made are problems. GPU nodes without the topology
'berth agent' publishes are warnings: berth then assumes one NVLink domain
per node, which works but may place a multi-GPU workspace across domains;
--strict makes them problems too.

With --specs DIR, it checks the GPU kinds the specs declare against the
device groups the nodes report: each group is listed with its kind; a kind
no group matches, a group no kind matches and a quota in a kind the cluster
lacks are warnings.

It changes nothing unless --fix is given; --fix turns native preemption off
for batch and service jobs with a check-and-set write of the whole scheduler
configuration.

Exit status: 0 when no problem remains (or --fix fixed it; warnings
allowed unless --strict), 1 when a problem remains, 2 when the command line
is wrong.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, _, _ := strings.Cut(cluster, ":")
			if name != "nomad" {
				return usagef("--cluster %q: doctor checks a Nomad cluster (nomad or nomad://HOST:PORT)", cluster)
			}
			c, err := openCluster(cmd.Context(), cluster, clusterOptions{})
			if err != nil {
				return err
			}
			d := c.Cluster.(*nomad.Driver)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "cluster: %s\n", c.Name)
			rep, err := d.Scheduler(cmd.Context())
			if err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			printScheduler(out, rep)
			problems := rep.Problems
			if fix && len(rep.Problems) > 0 {
				changed, err := d.FixScheduler(cmd.Context())
				if err != nil {
					return &exitError{Code: exitFailure, Err: err}
				}
				if changed {
					fmt.Fprintln(out, "fixed: native preemption is now off for batch and service jobs (check-and-set write of the whole configuration)")
				}
				if rep, err = d.Scheduler(cmd.Context()); err != nil {
					return &exitError{Code: exitFailure, Err: err}
				}
				problems = rep.Problems
			}
			snap, err := d.Observe(cmd.Context())
			if err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			set := &schema.Set{}
			if specs != "" {
				if set, err = loadSpecs(out, specs); err != nil {
					return err
				}
			}
			warnings := printNodes(out, snap, set)
			if strict {
				problems, warnings = append(problems, warnings...), nil
			}
			for _, e := range d.Evictions() {
				fmt.Fprintf(out, "evicted: %s replica %d on %s: %s\n", e.Workspace, e.Replica, e.Node, e.Reason)
				if e.By != "" {
					problems = append(problems, fmt.Sprintf("Nomad's native preemption evicted %s; berth's own preemption gives a checkpoint grace", e.Workspace))
				}
			}
			for _, p := range problems {
				fmt.Fprintln(out, "problem: "+p)
			}
			for _, w := range warnings {
				fmt.Fprintln(out, "warning: "+w)
			}
			switch {
			case len(problems) > 0:
				return &exitError{Code: exitFailure}
			case len(warnings) > 0:
				fmt.Fprintf(out, "ok: nothing stands in berth's way (%s; --strict fails on them)\n", text.Plural(len(warnings), "warning"))
			default:
				fmt.Fprintln(out, "ok: nothing stands in berth's way")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "nomad", "the Nomad cluster: nomad or nomad://HOST:PORT")
	cmd.Flags().BoolVar(&fix, "fix", false, "turn Nomad's native preemption off for batch and service jobs")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on warnings too (GPU nodes whose topology is guessed, GPU kinds and device groups that do not match)")
	cmd.Flags().StringVar(&specs, "specs", "", "a spec tree (directory) whose GPU kinds to check the cluster's device groups against")
	return cmd
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func printScheduler(w io.Writer, rep nomad.SchedulerReport) {
	c := rep.Config
	fmt.Fprintf(w, "scheduler: algorithm %s, memory oversubscription %s, modify index %d\n",
		c.SchedulerAlgorithm, onOff(c.MemoryOversubscriptionEnabled), c.ModifyIndex)
	p := c.PreemptionConfig
	fmt.Fprintf(w, "native preemption: batch %s, service %s, system %s, sysbatch %s\n",
		onOff(p.BatchSchedulerEnabled), onOff(p.ServiceSchedulerEnabled), onOff(p.SystemSchedulerEnabled), onOff(p.SysBatchSchedulerEnabled))
}

// printNodes lists GPU nodes, where their topology comes from and, for
// a node of several device groups or where the specs declare GPU kinds,
// each group with its kind; it returns a warning for each GPU node
// without the agent's topology and each disagreement between the
// declared kinds and the cluster (plan.KindWarnings).
func printNodes(w io.Writer, snap drivers.Snapshot, set *schema.Set) (warnings []string) {
	nodes := append([]drivers.Node(nil), snap.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		if len(n.GPUs) == 0 {
			continue
		}
		domains, migParents := map[int]bool{}, map[int]bool{}
		var models []string // in the order the node lists them
		count := map[string]int{}
		whole := 0
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if count[g.Model] == 0 {
				models = append(models, g.Model)
			}
			count[g.Model]++
			if g.IsMIG() {
				migParents[g.Domain] = true // its parent's (berth agent)
			} else {
				whole++
				domains[g.Domain] = true
			}
		}
		src := "from berth agent"
		if n.TopologyGuessed {
			src = "guessed: one NVLink domain (run berth agent on it)"
			warnings = append(warnings, fmt.Sprintf("node %s has no GPU topology from berth agent; berth assumes one NVLink domain", n.Name))
		}
		status := "ready"
		if !n.Ready {
			status = "down"
		} else if !n.Eligible {
			status = "ineligible"
		}
		what := text.Plural(whole, "GPU") + fmt.Sprintf(" in %d NVLink domain(s)", len(domains))
		mig := len(n.GPUs) - whole
		migs := text.Plural(mig, "MIG instance")
		if !n.TopologyGuessed {
			migs += " of " + text.Plural(len(migParents), "GPU")
		}
		switch {
		case mig > 0 && whole == 0:
			what = migs
		case mig > 0:
			what += " and " + migs
		}
		fmt.Fprintf(w, "node %s: %s, %s, topology %s\n", n.Name, status, what, src)
		if len(models) == 1 && whole == len(n.GPUs) && len(set.Kinds) == 0 {
			continue // one model of whole GPUs: said above
		}
		// Device groups of several models, or MIG instances, or declared
		// kinds: each group, with its kind.
		for _, m := range models {
			kind := ""
			if len(set.Kinds) > 0 {
				kind = ", no GPU kind matches it"
				if k := set.KindOf(m); k != nil {
					kind = ", kind " + k.Meta.Name
				}
			}
			if mig, ok := drivers.ParseMIG(m); ok {
				who := fmt.Sprintf("only a workspace whose gpuModel is %q runs on them", m)
				if k := set.KindOf(m); k != nil {
					who = fmt.Sprintf("only a workspace whose gpuKind is %s, or gpuModel %q, runs on them", k.Meta.Name, m)
				}
				fmt.Fprintf(w, "  %s: %s, %s slices of %s%s (%s)\n", m, text.Plural(count[m], "MIG instance"), mig.Profile, mig.Parent, kind, who)
			} else {
				fmt.Fprintf(w, "  %s: %s%s\n", m, text.Plural(count[m], "GPU"), kind)
			}
		}
	}
	return append(warnings, plan.KindWarnings(set, &snap)...)
}

// loadSpecs loads the spec tree at dir (a directory or file, as
// validate reads them) for doctor; invalid specs are an error that
// lists their diagnostics.
func loadSpecs(w io.Writer, dir string) (*schema.Set, error) {
	set, diags, err := load.Paths(dir)
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: fmt.Errorf("--specs %s: %w", dir, err)}
	}
	if set == nil {
		for _, d := range diags {
			fmt.Fprintln(w, d.String())
		}
		return nil, &exitError{Code: exitFailure, Err: fmt.Errorf("--specs %s: the specs are invalid (%s above)", dir, text.Plural(len(diags), "diagnostic"))}
	}
	return set, nil
}
