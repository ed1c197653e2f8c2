// Command nomadpack stands in for nomad-pack where it is not installed
// (these machines; the Go proxy does not serve it): `render` and `run`
// with nomad-pack's flags for a pack directory, rendered by internal/pack.
// `run` registers each rendered job with the nomad CLI on PATH (nomad job
// run), then prints the pack's outputs, as nomad-pack does. The
// quickstart's test (internal/e2e) puts it on PATH as nomad-pack.
//
//	nomadpack render DIR [--var NAME=VALUE]... [--to-dir OUT]
//	nomadpack run DIR [--var NAME=VALUE]...
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/berth-dev/berth/internal/pack"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "nomad-pack (berth's stand-in):", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 || (args[0] != "render" && args[0] != "run") {
		return fmt.Errorf("usage: render|run DIR [--var NAME=VALUE]... [--to-dir OUT]")
	}
	cmd, dir := args[0], args[1]
	set := map[string]string{}
	toDir := ""
	for i := 2; i < len(args); i++ {
		a := args[i]
		val := func() (string, error) {
			if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
				return v, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch {
		case a == "--var" || a == "-var" || strings.HasPrefix(a, "--var="):
			v, err := val()
			if err != nil {
				return err
			}
			k, x, ok := strings.Cut(v, "=")
			if !ok {
				return fmt.Errorf("--var %s: want NAME=VALUE", v)
			}
			set[k] = x
		case a == "--to-dir" || strings.HasPrefix(a, "--to-dir=") || a == "-o":
			v, err := val()
			if err != nil {
				return err
			}
			toDir = v
		default:
			return fmt.Errorf("unknown argument %s", a)
		}
	}
	p, err := pack.Load(dir)
	if err != nil {
		return err
	}
	r, err := p.Render(set)
	if err != nil {
		return err
	}
	name := filepath.Base(filepath.Clean(dir))
	for _, n := range r.Names() {
		file := name + "/" + strings.TrimSuffix(n, ".tpl")
		switch {
		case cmd == "render" && toDir == "":
			fmt.Printf("%s:\n\n%s\n", file, r.Jobs[n])
		case cmd == "render":
			out := filepath.Join(toDir, file)
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(out, []byte(r.Jobs[n]), 0o644); err != nil {
				return err
			}
		default:
			c := exec.Command("nomad", "job", "run", "-detach", "-")
			c.Stdin = strings.NewReader(r.Jobs[n])
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			if err := c.Run(); err != nil {
				return fmt.Errorf("nomad job run %s: %w", file, err)
			}
		}
	}
	if cmd == "run" && r.Outputs != "" {
		fmt.Print("\n" + r.Outputs)
	}
	return nil
}
