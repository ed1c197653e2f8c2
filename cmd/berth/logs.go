package main

import (
	"strings"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/schema"
	"github.com/spf13/cobra"
)

func newLogsCmd() *cobra.Command {
	var cluster string
	var follow, stderr bool
	var replica int
	cmd := &cobra.Command{
		Use:   "logs PROJECT/WORKSPACE",
		Short: "Print a workspace's task output from Nomad",
		Long: `logs prints what a workspace's task wrote to stdout (or, with --stderr, to
stderr), read through Nomad's API from the allocation of its current run,
or of its last run when it has ended. -f keeps printing what the task
writes until interrupted. A gang's replicas each have their own output:
--replica picks one (default 0).

Nomad is found as for --cluster nomad (NOMAD_ADDR, NOMAD_TOKEN and the
TLS variables); --cluster nomad://HOST:PORT names it instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ref schema.Ref
			if err := ref.UnmarshalText([]byte(args[0])); err != nil {
				return usagef("%v", err)
			}
			if replica < 0 {
				return usagef("--replica %d: want 0 or more", replica)
			}
			arg, ok := strings.CutPrefix(cluster, "nomad")
			if !ok || (arg != "" && !strings.HasPrefix(arg, ":")) {
				return usagef("--cluster %q: berth logs reads Nomad: want nomad or nomad://HOST:PORT", cluster)
			}
			cfg, err := nomadConfig(strings.TrimPrefix(arg, ":"))
			if err != nil {
				return err
			}
			d, err := nomad.New(cfg)
			if err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			defer d.Close()
			stream := "stdout"
			if stderr {
				stream = "stderr"
			}
			if err := d.Logs(cmd.Context(), ref, replica, stream, follow, cmd.OutOrStdout()); err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "nomad", "the Nomad cluster: nomad (NOMAD_ADDR) or nomad://HOST:PORT")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what the task writes until interrupted")
	cmd.Flags().BoolVar(&stderr, "stderr", false, "print stderr instead of stdout")
	cmd.Flags().IntVar(&replica, "replica", 0, "the replica of a gang whose output to print")
	return cmd
}
