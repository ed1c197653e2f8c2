package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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

// usageError is a mistake in the command line: run prints it and exits
// 2. The checks of the command line return one: berth's own through
// usagef, cobra's flag parsing through the root's FlagErrorFunc, and the
// argument counts through usageArgs. Two of cobra's checks return plain
// errors: the lookup of a command's name, which run asks again, and the
// argument count of the hidden __complete that shells call (never with
// nothing to complete), which Execute adds after newRoot has returned.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError saying what is wrong with the command line.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// usageArgs makes the errors of an argument check (cobra.NoArgs,
// cobra.ExactArgs…) usage errors; nil stays nil.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	if check == nil {
		return nil
	}
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return &usageError{err}
		}
		return nil
	}
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
		return usagef("%w (see '%s --help')", err, c.CommandPath())
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
	// cobra's own commands (help, completion) are added here rather than
	// by Execute, so that their argument checks are wrapped with the rest.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var wrap func(c *cobra.Command)
	wrap = func(c *cobra.Command) {
		c.Args = usageArgs(c.Args)
		for _, sub := range c.Commands() {
			wrap(sub)
		}
	}
	wrap(root)
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
	// An exitError wrapping a usage error (a cluster scheme's, which
	// openCluster counts as a failure) keeps its own code.
	var ee *exitError
	var ue *usageError
	switch {
	case errors.As(err, &ee):
		if ee.Err != nil {
			fmt.Fprintln(stderr, "berth:", ee.Err)
		}
		return ee.Code
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "berth:", ue)
		return exitUsage
	}
	fmt.Fprintln(stderr, "berth:", err)
	if _, _, lookup := root.Find(args); lookup != nil {
		// cobra's lookup of the command's name, the one check of the
		// command line that cannot be wrapped: it fails for an unknown
		// command (berth frobnicate), and only with the root's Args left
		// nil, since with Args set cobra would print the help instead.
		return exitUsage
	}
	return exitFailure
}
