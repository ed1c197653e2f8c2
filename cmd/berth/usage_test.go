package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUsageExit pins the exit code and the message of each kind of
// command-line mistake, cobra's own (an unknown command or flag, a wrong
// number of arguments) and berth's (a flag value berth rejects), beside
// a failure that is not a usage error.
func TestUsageExit(t *testing.T) {
	type result struct {
		Code   int
		Stderr string
	}
	tests := map[string]struct {
		args []string
		want result
	}{
		"no arguments prints help": {nil, result{0, ""}},
		"help on an unknown topic": {[]string{"help", "frobnicate"}, result{0, ""}},
		"unknown command":          {[]string{"frobnicate"}, result{2, "berth: unknown command \"frobnicate\" for \"berth\"\n"}},
		"unknown command, with a suggestion": {[]string{"valdate"}, result{2,
			"berth: unknown command \"valdate\" for \"berth\"\n\nDid you mean this?\n\tvalidate\n\n"}},
		"unknown flag":                            {[]string{"validate", "--frobnicate"}, result{2, "berth: unknown flag: --frobnicate (see 'berth validate --help')\n"}},
		"unknown shorthand":                       {[]string{"validate", "-Z"}, result{2, "berth: unknown shorthand flag: 'Z' in -Z (see 'berth validate --help')\n"}},
		"flag without value":                      {[]string{"plan", "--cluster"}, result{2, "berth: flag needs an argument: --cluster (see 'berth plan --help')\n"}},
		"flag of the wrong type":                  {[]string{"simulate", "--limit", "x"}, result{2, "berth: invalid argument \"x\" for \"--limit\" flag: strconv.ParseInt: parsing \"x\": invalid syntax (see 'berth simulate --help')\n"}},
		"argument to a command that takes none":   {[]string{"version", "extra"}, result{2, "berth: unknown command \"extra\" for \"berth version\"\n"}},
		"missing argument":                        {[]string{"explain"}, result{2, "berth: accepts 1 arg(s), received 0\n"}},
		"too many arguments":                      {[]string{"plan", "a", "b"}, result{2, "berth: accepts at most 1 arg(s), received 2\n"}},
		"too many arguments, detailed exit":       {[]string{"plan", "--detailed-exitcode", "a", "b"}, result{2, "berth: accepts at most 1 arg(s), received 2\n"}},
		"argument to cobra's completion":          {[]string{"completion", "bash", "extra"}, result{2, "berth: unknown command \"extra\" for \"berth completion bash\"\n"}},
		"flag value berth rejects":                {[]string{"status", "-o", "yaml"}, result{2, "berth: --output \"yaml\": want table or json\n"}},
		"flag value berth rejects, detailed exit": {[]string{"plan", "--detailed-exitcode", "-o", "yaml", "."}, result{1, "berth: --output \"yaml\": want text, markdown or json\n"}},
		"bad workspace name":                      {[]string{"explain", "no-slash"}, result{2, "berth: workspace reference \"no-slash\": want project/name\n"}},
		// openCluster counts whatever a scheme returns as a failure.
		"mistake in a --cluster scheme's argument": {[]string{"plan", "--cluster", "nomad:bogus", "EMPTY"}, result{1, "berth: --cluster nomad:bogus: want nomad or nomad://HOST:PORT\n"}},
		"not a usage error":                        {[]string{"simulate", "--trace", "does-not-exist"}, result{1, "berth: replay: read trace: open does-not-exist: no such file or directory\n"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			args := slices.Clone(tt.args)
			if i := slices.Index(args, "EMPTY"); i >= 0 {
				args[i] = t.TempDir() // a directory of no specs
			}
			var stdout, stderr strings.Builder
			got := result{Code: run(args, &stdout, &stderr), Stderr: stderr.String()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("berth %s (-want +got):\n%s", strings.Join(tt.args, " "), diff)
			}
		})
	}
}
