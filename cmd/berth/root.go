package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and found a problem (invalid specs, failed apply)
	exitUsage   = 2 // the command line was wrong
)

// exitError carries an exit code out of a command. A nil Err means the
// command already printed what the user needs.
type exitError struct {
	Code int
	Err  error
}

func (e *exitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *exitError) Unwrap() error { return e.Err }

// usageError marks a command-line mistake (exit 2).
func usageError(format string, args ...any) error {
	return &exitError{Code: exitUsage, Err: fmt.Errorf(format, args...)}
}

// newRoot builds the berth command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "A GitOps reconciler for GPU clusters on Nomad",
		Long: `berth keeps a Nomad GPU cluster matching a git repository of specs:
priority tiers, projects with quotas and fair share, and GPU workspaces.
It validates specs with CUE, decides who runs where (priority preemption
with checkpoint grace, quotas with borrowing and reclaim, fair share,
NVLink/NUMA-aware placement, gangs) and applies the decision.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{Code: exitUsage, Err: fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	// berth's commands, each by its constructor. A new command is added
	// here; the help lists them sorted by name, whatever the order here.
	root.AddCommand(
		// author specs
		newValidateCmd(),
		newPlanCmd(),
		// drive a cluster
		newApplyCmd(),
		newReconcileCmd(),
		// ask a running loop
		newStatusCmd(),
		newExplainCmd(),
		newLogsCmd(),
		// set up and operate
		newAgentCmd(),
		newDoctorCmd(),
		newSnapshotCmd(),
		// study policies
		newSimulateCmd(),
		newVersionCmd(),
	)
	return root
}

// Main runs berth with os.Args and returns the process exit code. Tests
// call it in-process through testscript.
func Main() int {
	return run(os.Args[1:], os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(stderr, "berth:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(stderr, "berth:", err)
	if isUsage(err) {
		return exitUsage
	}
	return exitFailure
}

// isUsage reports whether cobra rejected the command line itself.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
