package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-dev/berth/drivers/nomad/agent"
	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	var nodeID string
	var interval time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "agent [--node-id ID] [--interval 30s] [--once]",
		Short: "Publish this GPU node's topology (NVML) as Nomad node metadata",
		Long: `agent runs on each GPU node (examples/deploy/berth-agent.nomad.hcl is a
Nomad system job for it). It reads the GPUs with NVML -- UUID, model, memory,
PCI bus ID, NUMA node, NVLink peers and each MIG-enabled GPU's MIG instances --
and publishes them as dynamic node metadata under berth.gpu. through the local
Nomad client (NOMAD_ADDR, NOMAD_TOKEN), refreshed every --interval and
whenever they change. berth reads it to place workspaces within one NVLink
domain or NUMA node, and a replica's MIG instances on one GPU.

Without the NVIDIA driver (no libnvidia-ml.so.1, or its kernel module not
loaded) it says so once on stderr and waits, trying again every --interval:
on a node marked as a GPU node before its driver is installed, the system
job runs idle instead of failing and restarting, and publishes once the
driver is there (until then berth doctor lists the node's topology as
guessed). With --once it exits with status 1 instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			open := func() (agent.Reader, error) {
				r, err := agent.NewNVMLReader()
				if err != nil {
					return nil, err
				}
				return r, nil
			}
			var reader agent.Reader
			var err error
			if once {
				reader, err = open()
			} else {
				reader, err = agent.Open(ctx, open, interval, cmd.ErrOrStderr())
				if ctx.Err() != nil {
					return nil // stopped while waiting for the driver
				}
			}
			if err != nil {
				return &exitError{Code: exitFailure, Err: fmt.Errorf("agent: %w", err)}
			}
			defer reader.Close()
			cfg := api.DefaultConfig()
			client, err := api.NewClient(cfg)
			if err != nil {
				return &exitError{Code: exitFailure, Err: fmt.Errorf("agent: nomad client for %s: %w", cfg.Address, err)}
			}
			a := &agent.Agent{Reader: reader, Client: client, NodeID: nodeID, Interval: interval, Log: cmd.ErrOrStderr()}
			if once {
				changed, err := a.Once(ctx)
				if err != nil {
					return &exitError{Code: exitFailure, Err: err}
				}
				gpus, _ := reader.Read()
				fmt.Fprintf(cmd.OutOrStdout(), "%s; metadata %s\n", agent.Summary(gpus), map[bool]string{true: "published", false: "already current"}[changed])
				return nil
			}
			if err := a.Run(ctx); err != nil {
				return &exitError{Code: exitFailure, Err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&nodeID, "node-id", os.Getenv("BERTH_NODE_ID"), "Nomad node ID to write (default $BERTH_NODE_ID, else the local client's node)")
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "how often to read the GPUs again (and, without NVML, to try loading it)")
	cmd.Flags().BoolVar(&once, "once", false, "publish once and exit")
	return cmd
}
