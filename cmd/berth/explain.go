package main

import (
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/spf13/cobra"
)

func newExplainCmd() *cobra.Command {
	var sf serverFlags
	cmd := &cobra.Command{
		Use:   "explain PROJECT/WORKSPACE",
		Short: "Say why a workspace is in its state",
		Long: `explain asks a running 'berth reconcile' why a workspace is pending, why it
was preempted and by whom, and when it resumed, in sentences, followed by
its history of transitions.

` + serverHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ref schema.Ref
			if err := ref.UnmarshalText([]byte(args[0])); err != nil {
				return usagef("%v", err)
			}
			var d view.WorkspaceDetail
			path := "/api/v1/workspaces/" + url.PathEscape(ref.Project) + "/" + url.PathEscape(ref.Name)
			if _, err := sf.get(cmd.Context(), path, &d); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, s := range d.Explanation {
				fmt.Fprintln(w, s)
			}
			if d.Workspace.Decision != "" {
				fmt.Fprintf(w, "Last decision: %s\n", d.Workspace.Decision)
			}
			fmt.Fprintln(w, "\nHistory:")
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, t := range d.History {
				from := string(t.From)
				if from == "" {
					from = "new"
				}
				detail := t.Reason
				if t.Node != "" {
					detail = strings.TrimSpace(fmt.Sprintf("on %s %s", t.Node, detail))
				}
				fmt.Fprintf(tw, "  %s\t%s → %s\tprogress %s\t%s\n", t.At.UTC().Format("15:04:05"), from, t.To, text.Seconds(t.Progress.D()), detail)
			}
			tw.Flush()
			return nil
		},
	}
	sf.add(cmd.Flags())
	return cmd
}
