package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
	"github.com/spf13/cobra"
)

func newApplyCmd() *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply --source DIR --cluster CLUSTER",
		Short: "Run one reconcile cycle and print what it did",
		Long: `apply runs one cycle of the loop: read and validate the specs under
--source, observe the cluster, decide, apply the plan, and print the plan,
what was applied and every workspace's state. Starts that wait for their
victims to release GPUs are left for the next cycle.

A revision that would stop or remove many of the workspaces berth manages
at once, or that holds no specs at all, is refused as berth reconcile
refuses it, unless --allow-mass-prune (or the SchedulingPolicy's
berth.dev/allow-mass-prune: "true" annotation) allows it.

Exit status: 0 when everything was applied, 1 when the specs are invalid or
an action failed, 2 when the command line is wrong.

` + limitsHelp + `

` + clusterHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runApply(cmd, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.source, "source", "", "directory of specs to apply")
	fl.StringVar(&o.cluster, "cluster", "", "the cluster to drive (see below)")
	fl.Float64Var(&o.simSpeed, "sim-speed", 1, "how fast a simulated cluster's clock runs")
	fl.StringVar(&o.logFormat, "log-format", "text", "text or json (logs go to stderr)")
	fl.StringVar(&o.logLevel, "log-level", "error", "debug, info, warn or error")
	o.prune.add(fl)
	o.limits.add(fl)
	fl.StringVar(&o.cacheDir, "cache-dir", defaultCacheDir(), "where apply keeps what it learned for its next run: each spec file's hash and validated documents, and on Nomad what it read of each job's current version; that run reads and validates only the files that changed, and reads only the jobs changed since; \"\" keeps nothing")
	fl.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the cycle to this file (go tool pprof)")
	fl.MarkHidden("cpuprofile")
	return cmd
}

// applyOptions are berth apply's flags.
type applyOptions struct {
	loopFlags
	cacheDir   string
	cpuProfile string
}

// runApply is berth apply's body: check the command line, open the
// cluster, run one cycle of the loop, and report what it did.
func runApply(cmd *cobra.Command, o applyOptions) error {
	// 1. The command line.
	if err := o.check(); err != nil {
		return err
	}
	limits, err := o.limits.limits()
	if err != nil {
		return err
	}
	log, err := newLogger(cmd.ErrOrStderr(), o.logFormat, o.logLevel)
	if err != nil {
		return err
	}

	// 2. The cluster, and the loop that drives it.
	c, err := openCluster(cmd.Context(), o.cluster, clusterOptions{SimSpeed: o.simSpeed, Logger: log})
	if err != nil {
		return err
	}
	if c.Close != nil {
		defer c.Close()
	}
	specs, save := openSpecCache(o.cacheDir, o.source, limits, log)
	saveVersions := openVersionMemo(o.cacheDir, c, log)
	loop, err := reconcile.New(reconcile.Config{
		Source: specs.Source, Load: specs.Load, Cluster: c.Cluster, Store: c.Store,
		Logger: log, ClusterName: c.Name, BerthVersion: berthVersion(),
		AllowMassPrune: o.prune.allow, MassPrunePercent: o.prune.percent, MassPruneMin: o.prune.atMin,
		Limits: limits,
	})
	if err != nil {
		return err
	}

	// 3. One cycle, profiled with --cpuprofile (until the report is out).
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := loop.Once(cmd.Context())
	save()
	saveVersions()

	// 4. What it did.
	return reportApply(cmd.OutOrStdout(), c, loop, res, err)
}

// check reports a wrong command line as a usage error: apply reads a
// directory only.
func (o *applyOptions) check() error {
	if err := o.loopFlags.check("apply"); err != nil {
		return err
	}
	if fi, err := os.Stat(o.source); err != nil || !fi.IsDir() {
		return usagef("--source %s: not a directory (looked for %s); give the directory that holds the specs", o.source, absPath(o.source))
	}
	return nil
}

// reportApply prints what the cycle did, and returns the command's error:
// a revision invalid or refused (its problems listed, nothing applied), a
// cluster out of reach (no table), else the table, then the cycle's error
// or the count of failed actions.
func reportApply(out io.Writer, c *openedCluster, loop *reconcile.Loop, res reconcile.Result, err error) error {
	var stalled *reconcile.StalledError
	if errors.As(err, &stalled) {
		what := "is invalid"
		if !res.ObservedAt.IsZero() {
			// Valid, but refused against the cluster: the deletion guard.
			what = "is refused"
		}
		fmt.Fprintf(out, "revision %s %s; nothing applied:\n", stalled.Revision, what)
		for _, p := range stalled.Problems {
			fmt.Fprintln(out, "  "+p)
		}
		return &exitError{Code: exitFailure}
	}
	if err != nil && res.Revision != "" && res.ObservedAt.IsZero() {
		// Nothing was observed, so nothing was planned: no table.
		msg := fmt.Sprintf("could not reach the cluster (%s): %v", c.Name, err)
		if c.Unreachable != "" {
			msg += "\n" + c.Unreachable
		}
		return &exitError{Code: exitFailure, Err: errors.New(msg)}
	}
	printApply(out, c.Name, res, loop.Status())
	if err != nil {
		return &exitError{Code: exitFailure, Err: err}
	}
	if len(res.Failed) > 0 {
		return &exitError{Code: exitFailure, Err: fmt.Errorf("%d action(s) failed; the rest of the plan was applied (the table says why; berth reconcile retries them)", len(res.Failed))}
	}
	return nil
}

// startCPUProfile profiles the CPU into file until the returned stop.
func startCPUProfile(file string) (stop func(), err error) {
	fh, err := os.Create(file)
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	if err := pprof.StartCPUProfile(fh); err != nil {
		fh.Close()
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	return func() { pprof.StopCPUProfile(); fh.Close() }, nil
}

func printApply(w io.Writer, cluster string, res reconcile.Result, st view.Status) {
	fmt.Fprintf(w, "revision %s on %s\n", res.Revision, cluster)
	if res.Refused != nil {
		fmt.Fprintf(w, "revision %s refused; %s stays in force:\n", res.Refused.ID, res.Revision)
		for _, e := range res.Refused.Errors {
			fmt.Fprintln(w, "  "+e)
		}
	}
	fmt.Fprintf(w, "\nplan (%d actions):\n", len(res.Plan.Actions))
	for _, line := range strings.Split(strings.TrimSuffix(res.Plan.Text(), "\n"), "\n") {
		fmt.Fprintln(w, "  "+line)
	}
	fmt.Fprintf(w, "applied %d", len(res.Applied))
	if len(res.Deferred) > 0 {
		fmt.Fprintf(w, "; %d start(s) wait for their victims to release GPUs (next cycle)", len(res.Deferred))
	}
	fmt.Fprintln(w)
	for _, f := range res.Failed {
		fmt.Fprintf(w, "failed %s %s (%s): %v\n", f.Action.Kind, f.Action.Workspace, f.Class, f.Err)
	}
	fmt.Fprintln(w)
	printWorkspaces(w, st.Workspaces, false)
}

// printWorkspaces writes the workspaces table; times only when withTimes,
// the GPU kind each asks for only when one asks for a kind, and the GPU
// utilization only when one has a reading (GPU USE: its busiest GPU's,
// with the mean when its GPUs differ).
func printWorkspaces(w io.Writer, ws []view.WorkspaceStatus, withTimes bool) {
	// Buffered: tabwriter writes each cell on its own, and stdout is not
	// buffered (60,000 writes for a fleet of 10,000: 0.2 s).
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	kinds := slices.ContainsFunc(ws, func(s view.WorkspaceStatus) bool { return s.GPUKind != "" })
	gpusHeader := "GPUS"
	if kinds {
		gpusHeader = "GPUS\tKIND"
	}
	use := slices.ContainsFunc(ws, func(s view.WorkspaceStatus) bool { return s.GPUUse != nil })
	if use {
		gpusHeader += "\tGPU USE"
	}
	if withTimes {
		fmt.Fprintln(tw, "WORKSPACE\tSTATE\tNODE\t"+gpusHeader+"\tSINCE\tPROGRESS\tLOST\tREASON")
	} else {
		fmt.Fprintln(tw, "WORKSPACE\tSTATE\tNODE\t"+gpusHeader+"\tREASON")
	}
	for _, s := range ws {
		reason := s.Reason
		if s.PreemptedBy != nil && !strings.Contains(reason, s.PreemptedBy.String()) {
			reason = "by " + s.PreemptedBy.String() + ": " + reason
		}
		held := strconv.Itoa(len(s.GPUs))
		if kinds {
			held += "\t" + dash(s.GPUKind)
		}
		if use {
			held += "\t" + useShort(s.GPUUse)
		}
		if withTimes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Ref(), s.State, dash(s.Node), held,
				s.Since.UTC().Format("15:04:05"), text.Seconds(s.Progress.D()), text.Seconds(s.WorkLost.D()), dash(reason))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Ref(), s.State, dash(s.Node), held, dash(reason))
		}
	}
	tw.Flush()
}

// useShort is a workspace's GPU utilization in a table cell: "85%", or
// "85% (mean 42%)" when its GPUs differ; "-" without a reading.
func useShort(u *view.GPUUseStatus) string {
	if u == nil {
		return "-"
	}
	s := view.Percent(u.MaxPercent)
	if m := view.Percent(u.MeanPercent); m != s {
		s += " (mean " + m + ")"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// defaultCacheDir is --cache-dir's default: berth's directory in the
// user's cache directory ($XDG_CACHE_HOME, else ~/.cache), or "" when
// there is none.
func defaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "berth")
}

// specCache is where a one-shot command reads specs from and loads them
// with: through the cache file of the directory when there is one.
type specCache struct {
	Source source.Source
	Load   source.LoadFunc
}

// openSpecCache opens the cache file of spec directory dir under
// cacheDir ("": none) and returns the source and loader to use, and save,
// which keeps what the run learned for the next one. A cache that cannot
// be used costs its speed only: why is logged, and the specs are read and
// validated whole.
func openSpecCache(cacheDir, dir string, limits load.Limits, log *slog.Logger) (specCache, func()) {
	plain := specCache{Source: source.DirSource{Dir: dir}, Load: source.SpecLoader(limits)}
	if cacheDir == "" {
		return plain, func() {}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return plain, func() {}
	}
	path := cachePath(cacheDir, "specs", abs)
	c, err := source.OpenFileCache(path, cacheKey(), abs)
	if err != nil {
		log.Warn("the spec cache was not used; reading and validating every file", "file", path, "err", err)
	}
	return specCache{Source: c, Load: c.Loader(limits)}, func() {
		if err := c.Save(); err != nil {
			log.Warn("the spec cache was not saved; the next run validates every file again", "file", path, "err", err)
		}
	}
}

// cachePath is the file under cacheDir that keeps what kind of thing
// apply learned of name (a spec directory, a cluster).
func cachePath(cacheDir, kind, name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(cacheDir, kind+"-"+hex.EncodeToString(sum[:8]))
}

// cacheKey names this build of berth for the spec cache: its version, and
// the size and time of its executable (a development build keeps its
// version across changes).
func cacheKey() string {
	key := readBuildVersion().String()
	if exe, err := os.Executable(); err == nil {
		if st, err := os.Stat(exe); err == nil {
			key += fmt.Sprintf(" %d %d", st.Size(), st.ModTime().UnixNano())
		}
	}
	return key
}

// versionMemo is a cluster whose driver keeps what it read of job
// versions for the next process (the Nomad driver's version memo).
type versionMemo interface {
	SaveVersions(w io.Writer) error
	RestoreVersions(data []byte) error
}

// openVersionMemo gives the cluster's driver, when it keeps one, the
// version memo the last apply against the same cluster saved under
// cacheDir, and returns save, which keeps this run's for the next. A
// memo that cannot be used costs its speed only (logged).
func openVersionMemo(cacheDir string, c *openedCluster, log *slog.Logger) func() {
	m, ok := c.Cluster.(versionMemo)
	if !ok || cacheDir == "" {
		return func() {}
	}
	path := cachePath(cacheDir, "versions", c.Name)
	if data, err := os.ReadFile(path); err == nil {
		if err := m.RestoreVersions(data); err != nil {
			log.Warn("the job version memo was not used; reading every job version", "file", path, "err", err)
		}
	}
	return func() {
		var buf bytes.Buffer
		err := m.SaveVersions(&buf)
		if err == nil && buf.Len() > 0 { // nothing when the cluster was not read
			err = atomicfile.Write(path, buf.Bytes())
		}
		if err != nil {
			log.Warn("the job version memo was not saved; the next run reads every job version", "file", path, "err", err)
		}
	}
}
