// Command depcheck is `make lint`'s dependency check: govulncheck over
// berth's code against a pinned snapshot of the Go vulnerability database
// (the golang.org/x/vulndb module, fetched once from the Go module proxy
// like any module and read from the module cache after that, so the
// check runs offline). It fails when berth's code reaches a known
// vulnerability in a module it requires. Vulnerabilities in the standard
// library are the Go toolchain's to fix: they are listed with the Go
// release that fixes them, and fail the check only with
// DEPCHECK_STRICT_STDLIB=1. When the database or govulncheck cannot be
// had (no module cache and no network), it says plainly that the check
// was skipped and exits 0.
//
// The snapshot knows only the advisories published before its date:
// move vulnDB forward to learn newer ones.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

const (
	vulnDB      = "golang.org/x/vulndb@v0.0.0-20261105234957-e22db6528018" // advisories up to 2026-11-05
	govulncheck = "golang.org/x/vuln/cmd/govulncheck@v1.9.0"
)

func main() {
	os.Exit(run(os.Stdout))
}

func run(out io.Writer) int {
	dl, err := exec.Command("go", "mod", "download", "-json", vulnDB).Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(dl, &mod)
	}
	if err != nil || mod.Dir == "" {
		fmt.Fprintf(out, "dependency check SKIPPED: the vulnerability database %s is not in the module cache and could not be downloaded (%v%s)\n", vulnDB, err, mod.Error)
		return 0
	}
	db := filepath.Join(mod.Dir, "data", "osv")
	cmd := exec.Command("go", "run", govulncheck, "-format", "json", "-db", "file://"+db, "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	// govulncheck -format json exits 0 with findings; anything else is a
	// failure to run (or to download it).
	if err != nil {
		fmt.Fprintf(out, "dependency check SKIPPED: %s did not run: %v\n%s", govulncheck, err, lastLines(stderr.String(), 5))
		return 0
	}
	found, goVersion, err := parse(bytes.NewReader(stdout))
	if err != nil {
		fmt.Fprintf(out, "dependency check: cannot read govulncheck's output: %v\n", err)
		return 1
	}
	return report(out, found, goVersion)
}

// vuln is one advisory that berth's code reaches (a symbol-level finding).
type vuln struct {
	ID, Module, Version, Fixed, Package string
}

func parse(r io.Reader) (map[string]vuln, string, error) {
	found := map[string]vuln{}
	var goVersion string
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var msg struct {
			Config *struct {
				GoVersion string `json:"go_version"`
			} `json:"config"`
			Finding *struct {
				OSV          string `json:"osv"`
				FixedVersion string `json:"fixed_version"`
				Trace        []struct {
					Module, Version, Package, Function string
				} `json:"trace"`
			} `json:"finding"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return found, goVersion, nil
		} else if err != nil {
			return nil, "", err
		}
		if msg.Config != nil {
			goVersion = msg.Config.GoVersion
		}
		f := msg.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" {
			continue // imported or required, but not called
		}
		t := f.Trace[0]
		found[f.OSV] = vuln{ID: f.OSV, Module: t.Module, Version: t.Version, Fixed: f.FixedVersion, Package: t.Package}
	}
}

func report(out io.Writer, found map[string]vuln, goVersion string) int {
	var mods, std []vuln
	for _, v := range found {
		if v.Module == "stdlib" {
			std = append(std, v)
		} else {
			mods = append(mods, v)
		}
	}
	byID := func(s []vuln) { sort.Slice(s, func(i, j int) bool { return s[i].ID < s[j].ID }) }
	byID(mods)
	byID(std)
	code := 0
	if len(mods) > 0 {
		fmt.Fprintf(out, "dependency check FAILED: berth's code reaches %d known vulnerabilities in its modules (database %s):\n", len(mods), vulnDB)
		for _, v := range mods {
			fmt.Fprintf(out, "  %s  %s@%s (%s), fixed in %s: go get %s@%s\n", v.ID, v.Module, v.Version, v.Package, orNone(v.Fixed), v.Module, orNone(v.Fixed))
		}
		code = 1
	}
	if len(std) > 0 {
		var fixed []string
		for _, v := range std {
			fixed = append(fixed, v.Fixed)
		}
		slices.SortFunc(fixed, semver.Compare)
		fmt.Fprintf(out, "dependency check: the Go toolchain (%s) has %d known vulnerabilities that berth's code reaches, fixed in go%s (build releases with it):", goVersion, len(std), strings.TrimPrefix(fixed[len(fixed)-1], "v"))
		for _, v := range std {
			fmt.Fprintf(out, " %s (%s)", v.ID, v.Package)
		}
		fmt.Fprintln(out)
		if os.Getenv("DEPCHECK_STRICT_STDLIB") != "" {
			code = 1
		}
	}
	if code == 0 && len(mods) == 0 {
		fmt.Fprintf(out, "dependency check ok: no known vulnerability reached in berth's modules (govulncheck, database %s)\n", vulnDB)
	}
	return code
}

func orNone(s string) string {
	if s == "" {
		return "(no fix yet)"
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ") + "\n"
}
