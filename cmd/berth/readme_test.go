package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeSkipped are the README's examples that need what a test does not
// have, with the reason. Every other "$ " line of a code block must be
// one TestReadme runs.
var readmeSkipped = map[string]string{
	"berth status":                               "needs the berth reconcile that make run starts",
	"berth explain ":                             "needs the berth reconcile that make run starts",
	"berth doctor --cluster nomad":               "needs a Nomad agent (make e2e's TestReal tests cover doctor)",
	"scripts/simulate-bench.sh":                  "replays the whole trace: make bench",
	"go run ./drivers/nomad/nomadfake/fakenomad": "starts a server for the next example",
	"NOMAD_ADDR=":                                "needs the fake Nomad of the example before it",
}

// readmeRun are the examples TestReadme runs, from the repository root,
// comparing what they print with what the README shows.
var readmeRun = []string{
	"berth validate ",
	"berth apply --source examples/",
	"berth simulate --trace replay/testdata/",
	"examples/plan-pr/try.sh",
}

// TestReadme runs every example of README.md that can run from the
// repository and checks that it prints what the README says (an
// "(exit N)" at the end of the output is the exit status; the replay's
// decision timings and column widths are not compared: they measure the
// machine).
func TestReadme(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	examples := readmeExamples(t, filepath.Join(root, "README.md"))
	if len(examples) == 0 {
		t.Fatal("no examples found in README.md")
	}
	for _, ex := range examples {
		if why := skippedBecause(ex.cmd); why != "" {
			t.Logf("README.md:%d: %s: not run (%s)", ex.line, ex.cmd, why)
			continue
		}
		if !runnable(ex.cmd) {
			t.Errorf("README.md:%d: %q is neither run by TestReadme nor listed in readmeSkipped with a reason", ex.line, ex.cmd)
			continue
		}
		t.Run(strconv.Itoa(ex.line), func(t *testing.T) {
			args := strings.Fields(ex.cmd)
			cmd := exec.Command(args[0], args[1:]...)
			if strings.HasSuffix(args[0], ".sh") {
				if _, err := exec.LookPath("git"); err != nil {
					t.Skip("needs the git binary")
				}
				berth, err := exec.LookPath("berth")
				if err != nil {
					t.Fatal(err)
				}
				cmd = exec.Command("bash", args...)
				cmd.Env = append(os.Environ(), "BERTH="+berth)
			}
			cmd.Dir = root
			out, err := cmd.Output()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			got, want := normalize(ex.cmd, string(out)), normalize(ex.cmd, ex.out)
			if code != ex.exit || got != want {
				t.Errorf("README.md:%d: $ %s\nexit %d, printed:\n%s\nthe README shows (exit %d):\n%s", ex.line, ex.cmd, code, out, ex.exit, ex.out)
			}
		})
	}
}

type readmeExample struct {
	line int
	cmd  string
	out  string
	exit int
}

var exitNote = regexp.MustCompile(`\s+\(exit (\d+)\)$`)

// readmeExamples returns the "$ " commands of path's code blocks with the
// lines that follow each (to the next command or the end of the block).
func readmeExamples(t *testing.T, path string) []readmeExample {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeExample
	in, n := false, 0
	var cur *readmeExample
	done := func() {
		if cur != nil {
			cur.out = strings.TrimRight(cur.out, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			done()
			in = !in
		case !in:
		case strings.HasPrefix(line, "$ "):
			done()
			cmd, _, _ := strings.Cut(strings.TrimPrefix(line, "$ "), "#")
			cur = &readmeExample{line: n, cmd: strings.TrimSpace(cmd)}
		case cur != nil:
			if m := exitNote.FindStringSubmatch(line); m != nil {
				cur.exit, _ = strconv.Atoi(m[1])
				line = strings.TrimSuffix(line, m[0])
			}
			cur.out += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func skippedBecause(cmd string) string {
	for prefix, why := range readmeSkipped {
		if cmd == strings.TrimSpace(prefix) || strings.HasPrefix(cmd, prefix) {
			return why
		}
	}
	return ""
}

func runnable(cmd string) bool {
	for _, prefix := range readmeRun {
		if strings.HasPrefix(cmd, prefix) {
			return true
		}
	}
	return false
}

// normalize drops what measures the machine from the replay's table (the
// decision timings, and the column widths they set) and trailing blanks.
func normalize(cmd, s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(cmd, "berth simulate") {
			if strings.Contains(line, "decision p50 / p99") {
				continue
			}
			line = strings.Join(strings.Fields(line), " ")
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}
