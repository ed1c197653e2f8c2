package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-dev/berth/reconcile"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newStatusCmd) }

// defaultServer is the status API berth status and explain ask: $BERTH_SERVER
// or the loop's default address.
func defaultServer() string {
	if s := os.Getenv("BERTH_SERVER"); s != "" {
		return s
	}
	return "http://" + defaultListen
}

func newStatusCmd() *cobra.Command {
	var server, output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show projects and workspaces from a running loop",
		Long: `status asks a running 'berth reconcile' (--server, default $BERTH_SERVER or
http://127.0.0.1:4680) for the revision in force, the last refused one and
why, every project's quota, usage and share, and every workspace's state.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError("--output %q: want table or json", output)
			}
			var st reconcile.Status
			raw, err := getJSON(cmd.Context(), server, "/api/v1/status", &st)
			if err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			if output == "json" {
				cmd.OutOrStdout().Write(raw)
				return nil
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of a running berth reconcile")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// getJSON GETs path from server into v and returns the body.
func getJSON(ctx context.Context, server, path string, v any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := strings.TrimSuffix(server, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", server, err)
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

func printStatus(w io.Writer, st reconcile.Status) {
	if st.Revision != nil {
		fmt.Fprintf(w, "Revision:  %s\n", st.Revision.ID)
	} else {
		fmt.Fprintln(w, "Revision:  none valid yet")
	}
	if st.Cluster != "" {
		fmt.Fprintf(w, "Cluster:   %s\n", st.Cluster)
	}
	printSource(w, st.Source)
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tTIER\tQUOTA\tUSED\tBORROWED\tSHARE\tUSAGE")
	for _, p := range st.Projects {
		fmt.Fprintf(tw, "%s\t%s (%d)\t%d\t%d\t%d\t%.2f\t%.2f\n", p.Name, p.Tier, p.TierValue, p.QuotaGPUs, p.UsedGPUs, p.BorrowedGPUs, p.Share, p.UsageShare)
	}
	tw.Flush()
	fmt.Fprintln(w)
	printWorkspaces(w, st.Workspaces, true)
	printEndpoints(w, st.Workspaces)
}

// printEndpoints lists where workspaces with ports are reachable, when
// any is: one line per port of each replica.
func printEndpoints(w io.Writer, ws []reconcile.WorkspaceStatus) {
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

func roundDur(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.Round(time.Second).String()
}
