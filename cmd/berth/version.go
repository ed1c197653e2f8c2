package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newVersionCmd) }

// version is set by the linker (-X main.version=...) for releases; a
// development build reports its VCS revision instead.
var version = ""

func berthVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print berth's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "berth", berthVersion())
			return nil
		},
	}
}
