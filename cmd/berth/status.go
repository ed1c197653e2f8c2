package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/view"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// defaultServer is the status API berth status and explain ask: $BERTH_SERVER
// or the loop's default address.
func defaultServer() string {
	if s := os.Getenv("BERTH_SERVER"); s != "" {
		return s
	}
	return "http://" + defaultListen
}

// envToken holds the bearer token berth status and explain send, when
// --token-file is not given.
const envToken = "BERTH_TOKEN"

// serverFlags are how berth status and explain reach a running loop: its
// URL and the bearer token it requires when it listens beyond loopback
// (the contents of its --ui-token-file).
type serverFlags struct {
	server, tokenFile string
}

func (f *serverFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.server, "server", defaultServer(), "URL of a running berth reconcile (or $BERTH_SERVER)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token of a berth reconcile that listens beyond loopback: the contents of its --ui-token-file (or $"+envToken+")")
}

// serverHelp is the part of status's and explain's help about reaching
// the loop.
const serverHelp = `A berth reconcile on loopback (its default --listen 127.0.0.1:4680) needs
no token. One that listens on any other address requires a bearer token,
the contents of its --ui-token-file: give it with --token-file FILE or in
$BERTH_TOKEN. In the deploy job of examples/deploy it is the ui_token item
of the Nomad Variable nomad/jobs/berth:

  nomad var get -item ui_token nomad/jobs/berth > berth.token
  berth status --server http://HOST:4680 --token-file berth.token`

// token returns the bearer token to send: from --token-file, else
// $BERTH_TOKEN, else none.
func (f *serverFlags) token() (string, error) {
	if f.tokenFile == "" {
		return strings.TrimSpace(os.Getenv(envToken)), nil
	}
	b, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return "", usagef("--token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", usagef("--token-file %s is empty: it should hold the reconciler's bearer token (the contents of its --ui-token-file)", f.tokenFile)
	}
	return t, nil
}

// get GETs path from the loop into v and returns the body.
func (f *serverFlags) get(ctx context.Context, path string, v any) ([]byte, error) {
	token, err := f.token()
	if err != nil {
		return nil, err
	}
	body, err := getJSON(ctx, f.server, token, path, v)
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	return body, nil
}

func newStatusCmd() *cobra.Command {
	var (
		sf     serverFlags
		output string
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show projects and workspaces from a running loop",
		Long: `status asks a running 'berth reconcile' (--server, default $BERTH_SERVER or
http://127.0.0.1:4680) for the revision in force, the last refused one and
why, every project's quota, usage and share, and every workspace's state.
Where the specs declare GPU kinds, a project whose quota names kinds has a
row per kind under its own (which then counts its other GPUs), the
cluster's GPUs are counted by kind, and each workspace shows the kind it
asks for.

A loop that knows more than ` + thousands(view.DefaultStatusLimit) + ` workspaces serves them a page at a
time: status then shows the first page, the count of every workspace per
state and project, and how many more there are; --all fetches every page
(with --output json, one document with every workspace).

` + serverHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usagef("--output %q: want table or json", output)
			}
			var st view.Status
			raw, err := sf.get(cmd.Context(), "/api/v1/status", &st)
			if err != nil {
				return err
			}
			if all {
				// Follow the pages; the last one's header is the freshest.
				for st.Next != "" {
					var page view.Status
					if _, err := sf.get(cmd.Context(), "/api/v1/status?limit="+strconv.Itoa(view.MaxStatusLimit)+"&after="+url.QueryEscape(st.Next), &page); err != nil {
						return err
					}
					page.Workspaces = append(st.Workspaces, page.Workspaces...)
					st = page
				}
				if raw, err = json.MarshalIndent(st, "", "  "); err != nil {
					return &exitError{Code: exitFailure, Err: err}
				}
				raw = append(raw, '\n')
			}
			if output == "json" {
				cmd.OutOrStdout().Write(raw)
				return nil
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	sf.add(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().BoolVar(&all, "all", false, "list every workspace of a loop that serves them in pages (more than "+thousands(view.DefaultStatusLimit)+")")
	return cmd
}

// getJSON GETs path from server into v, with token as the bearer token
// when it is not empty, and returns the body.
func getJSON(ctx context.Context, server, token, path string, v any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := strings.TrimSuffix(server, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", server, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no berth reconcile answers at %s (start one, or pass --server): %w", server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		if token == "" {
			return nil, fmt.Errorf("the berth reconcile at %s requires a bearer token: give the contents of its --ui-token-file with --token-file FILE or $%s", server, envToken)
		}
		return nil, fmt.Errorf("the berth reconcile at %s refused the bearer token (from --token-file or $%s): it is not the contents of that berth's --ui-token-file", server, envToken)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s", e.Error)
		}
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	return body, nil
}

func printStatus(w io.Writer, st view.Status) {
	if st.Revision != nil {
		fmt.Fprintf(w, "Revision:  %s\n", st.Revision.ID)
	} else {
		fmt.Fprintln(w, "Revision:  none valid yet")
	}
	if st.Cluster != "" {
		fmt.Fprintf(w, "Cluster:   %s\n", st.Cluster)
	}
	printSource(w, st.Source)
	if l := st.Leader; l != nil {
		switch {
		case l.Leading:
			fmt.Fprintf(w, "Leader:    this replica (%s), term %d\n", l.Self, l.Term)
		case l.Leader != "":
			fmt.Fprintf(w, "Leader:    %s; this replica (%s) follows: read-only, it takes over if the leader dies\n", l.Leader, l.Self)
		default:
			fmt.Fprintf(w, "Leader:    none yet; this replica (%s) waits for the lease\n", l.Self)
		}
	}
	if st.Attempted != nil {
		fmt.Fprintf(w, "Refused:   %s\n", st.Attempted.ID)
		for _, e := range st.Attempted.Errors {
			fmt.Fprintln(w, "  "+e)
		}
	}
	if c := st.LastReconcile; c != nil {
		if c.Error != "" {
			fmt.Fprintf(w, "Last cycle failed: %s\n", c.Error)
		} else {
			fmt.Fprintf(w, "Observed:  %s on the cluster's clock (times below are on it too)\n", c.At.UTC().Format("15:04:05"))
		}
	}
	fmt.Fprintln(w)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tTIER\tQUOTA\tUSED\tBORROWED\tSHARE\tUSAGE")
	for _, p := range st.Projects {
		fmt.Fprintf(tw, "%s\t%s (%d)\t%d\t%d\t%d\t%.2f\t%.2f\n", p.Name, p.Tier, p.TierValue, p.QuotaGPUs, p.UsedGPUs, p.BorrowedGPUs, p.Share, p.UsageShare)
		// Its quota accounts per GPU kind, under it; the row above is
		// then its gpus account's (the workspaces of no kind it names).
		for _, k := range p.Kinds {
			fmt.Fprintf(tw, "  %s\t\t%d\t%d\t%d\t\t\n", k.Kind, k.QuotaGPUs, k.UsedGPUs, k.BorrowedGPUs)
		}
	}
	tw.Flush()
	for line := range strings.Lines(table.String()) {
		// A kind's row pads the share and usage it leaves empty.
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	printCPUMemQuotas(w, st.Projects)
	printClusterGPUs(w, st.ClusterGPUs)
	fmt.Fprintln(w)
	printWorkspaces(w, st.Workspaces, true)
	if sum := st.Summary; sum != nil && sum.Workspaces > len(st.Workspaces) {
		printSummary(w, st)
	}
	printQueue(w, st)
	printEndpoints(w, st.Workspaces)
}

// printCPUMemQuotas lists, for the projects whose quota names CPU or
// memory, their use of it against quota and borrow limit: "ml-research
// uses memory 70 GiB of 64 GiB (6 GiB borrowed; may borrow 16 GiB)".
// Nothing when no quota names either.
func printCPUMemQuotas(w io.Writer, ps []view.ProjectStatus) {
	limit := func(p *int64, text func(int64) string) string {
		if p == nil {
			return "unlimited"
		}
		return text(*p)
	}
	for _, p := range ps {
		var parts []string
		if p.QuotaCPUMHz > 0 {
			parts = append(parts, fmt.Sprintf("CPU %s of %s (%s borrowed; may borrow %s)", text.CPU(p.UsedCPUMHz), text.CPU(p.QuotaCPUMHz),
				text.CPU(p.BorrowedCPUMHz), limit(p.BorrowLimitCPUMHz, text.CPU)))
		}
		if p.QuotaMemoryBytes > 0 {
			parts = append(parts, fmt.Sprintf("memory %s of %s (%s borrowed; may borrow %s)", text.Bytes(p.UsedMemoryBytes), text.Bytes(p.QuotaMemoryBytes),
				text.Bytes(p.BorrowedMemoryBytes), limit(p.BorrowLimitMemoryBytes, text.Bytes)))
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "%s uses %s\n", p.Name, strings.Join(parts, ", "))
		}
	}
}

// printClusterGPUs lists the cluster's GPUs by kind, where the specs
// declare kinds: each kind's devices, those free, and what they weigh in
// GPU-equivalents; a model no kind matches stands for its own. Nothing
// when the specs declare no kinds.
func printClusterGPUs(w io.Writer, cs []view.KindCapacity) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU KIND\tGPUS\tFREE\tGPU-EQUIVALENTS")
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	for _, c := range cs {
		name := c.Kind
		if name == "" {
			name = "model " + c.Model
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s (%s free)\n", name, c.GPUs, c.Free, num(c.GPUEquivalents), num(c.FreeGPUEquivalents))
	}
	tw.Flush()
}

// printSummary says how many workspaces a page leaves out, and counts
// all of them per state and project.
func printSummary(w io.Writer, st view.Status) {
	sum := st.Summary
	fmt.Fprintf(w, "… and %s more: %s workspaces in all (berth status --all lists them; --output json --all as one document)\n",
		thousands(int64(sum.Workspaces-len(st.Workspaces))), thousands(int64(sum.Workspaces)))
	fmt.Fprintf(w, "  %s\n", stateCounts(sum.States))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range sum.Projects {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Name, thousands(int64(p.Workspaces)), stateCounts(p.States))
	}
	tw.Flush()
}

// queueRows is how many waiting workspaces printQueue lists.
const queueRows = 20

// printQueue lists the waiting workspaces with when each is likely to
// start (counted from the last observation), soonest first, those it
// cannot tell last: the first queueRows, and how many more wait (the
// workspace table and -o json have every one); nothing when none waits.
func printQueue(w io.Writer, st view.Status) {
	var waiting []view.WorkspaceStatus
	for _, s := range st.Workspaces {
		if s.LikelyStart != nil {
			waiting = append(waiting, s)
		}
	}
	if len(waiting) == 0 {
		return
	}
	slices.SortStableFunc(waiting, func(a, b view.WorkspaceStatus) int {
		la, lb := a.LikelyStart, b.LikelyStart
		if la.Known != lb.Known {
			if la.Known {
				return -1
			}
			return 1
		}
		return la.Likely.Compare(lb.Likely) // then by name: the status's order
	})
	var now time.Time
	if st.LastReconcile != nil {
		now = st.LastReconcile.At
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WAITING\tLIKELY START\tRUN TIME")
	for _, s := range waiting[:min(len(waiting), queueRows)] {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Ref(), s.LikelyStart.Text(now), runTimeShort(s.RunTime))
	}
	tw.Flush()
	if n := len(waiting) - queueRows; n > 0 {
		fmt.Fprintf(w, "… and %s more waiting (-o json gives each one's likelyStart)\n", thousands(int64(n)))
	}
}

// stateCounts is "2 Running, 7 Pending", in the order of a workspace's life.
func stateCounts(m map[view.State]int) string {
	var parts []string
	for _, s := range []view.State{view.StateRunning, view.StateStarting, view.StatePreempting, view.StateMoving, view.StatePending,
		view.StatePreempted, view.StateFailed, view.StateCompleted, view.StateStopped} {
		if n := m[s]; n > 0 {
			parts = append(parts, thousands(int64(n))+" "+string(s))
		}
	}
	return strings.Join(parts, ", ")
}

// runTimeShort is a predicted run time in a table cell: "3h (1h–5h)",
// "6h (stated)", or "-".
func runTimeShort(r *view.RunTimeStatus) string {
	if r == nil {
		return "-"
	}
	med := text.RoughDuration(r.Median.D())
	switch lo, hi := text.RoughDuration(r.Low.D()), text.RoughDuration(r.High.D()); {
	case r.PastRuns == 0:
		return med + " (stated)"
	case lo != hi:
		return fmt.Sprintf("%s (%s–%s)", med, lo, hi)
	}
	return med
}

// printEndpoints lists where workspaces with ports are reachable, when
// any is: one line per port of each replica.
func printEndpoints(w io.Writer, ws []view.WorkspaceStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, s := range ws {
		for _, e := range s.Endpoints {
			if !header {
				fmt.Fprintln(w)
				fmt.Fprintln(tw, "CONNECT\tREPLICA\tPORT\tADDRESS")
				header = true
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.Ref(), e.Replica, e.Label, e.Address)
		}
	}
	tw.Flush()
}
