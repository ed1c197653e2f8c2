package berth

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/berth-dev/berth"

// allowed lists, for each package prefix, the berth packages it may import
// (prefixes too). The first matching rule wins; a package without a rule
// may import anything. A name starting with "=" is that package alone,
// not its subtree.
var allowed = []struct {
	pkg   string
	berth []string
}{
	{"schema/schematest", []string{"schema"}},
	// How numbers, sizes and durations are written: a leaf every
	// message may use.
	{"internal/text", nil},
	// The compact cluster text of the scenario tests, read into a
	// snapshot.
	{"internal/clustertest", []string{"schema", "=drivers"}},
	// The spec types: no CUE, no parser, no I/O.
	{"schema", nil},
	// Files read as the loader reads them, shared by the loader and the
	// sim's cluster file: a leaf.
	{"internal/readfile", nil},
	// Release artifacts: no berth package but its own.
	{"internal/dist", []string{"internal/dist"}},
	// The pack renderer of the tests and the nomad-pack stand-in.
	{"internal/pack", []string{"internal/pack"}},
	// The loader: YAML and CUE in, a validated schema.Set out, with the
	// spec tree's files and the cache of what it learned.
	{"load", []string{"schema", "internal/readfile", "internal/text"}},
	// The ground floor beside schema: the observed world, the Cluster
	// contract and how drivers fail.
	{"=drivers", []string{"schema"}},
	{"policies", []string{"schema", "internal/text", "=drivers", "policies"}},
	// What a change would do: actions from a decision, the mass-prune
	// guard, berth plan's report. Pure, below the loop.
	{"plan", []string{"schema", "internal/text", "=drivers", "policies"}},
	// Where specs come from: the contract and the directory source (and
	// its cache file, written whole by internal/atomicfile, a leaf), with
	// the git source and the directory watch beside it; each revision is
	// loaded by load.
	{"internal/atomicfile", nil},
	// The clocks: the machine's, and one that moves when told.
	{"internal/clock", nil},
	{"=source", []string{"schema", "load", "internal/atomicfile"}},
	{"source", []string{"schema", "load", "=source"}},
	// Who may write, among replicas.
	{"leader", []string{"schema", "=drivers"}},
	// The replay is a second loop beside reconcile: it runs the decision
	// functions it compares over the sim. Its baselines are pure decision
	// functions like policies'. It turns decisions into actions with the
	// loop's own plan step (plan.New, pure), so it cannot read a decision
	// another way.
	{"replay/baseline", []string{"schema", "=drivers", "policies"}},
	{"replay", []string{"schema", "internal/text", "=drivers", "drivers/sim", "policies", "plan", "replay"}},
	// The drivers reach clusters; none imports policies or reconcile.
	// The simulator's manual clock is internal/clock's; the sim reads its
	// cluster file as the loader reads a file.
	{"drivers", []string{"schema", "drivers", "internal/readfile", "internal/clock"}},
	// The read models: what the loop publishes of a cycle (the status,
	// the explanations, the likely starts, the dashboard, the metrics),
	// built from its values and never from the loop itself.
	{"view", []string{"schema", "internal/text", "=drivers", "policies", "plan", "=source", "leader"}},
	// The loop: it sees sources, clusters and the election through their
	// contracts.
	{"reconcile", []string{"schema", "load", "internal/text", "=drivers", "policies", "plan", "=source", "leader", "internal/clock", "reconcile", "view"}},
	// Notifications: what the loop publishes (view.News), routed by the
	// specs and sent over HTTP, off the loop's goroutine.
	{"notify", []string{"schema", "view", "internal/text", "internal/clock"}},
	// The HTTP surface serves what the loop exposes.
	{"api", []string{"schema", "reconcile", "view", "api"}},
}

// transports are the modules that reach the outside (git, the file
// system's events, WebSockets, the metrics endpoint); the loop reaches
// none of them, not even through another berth package.
var transports = []string{
	"github.com/go-git/", "github.com/fsnotify/", "github.com/coder/websocket",
	"github.com/prometheus/client_golang/prometheus/promhttp", "net/http",
}

// pure packages do no I/O and read no clock ("=" names one package, not
// its subtree).
var pure = []string{"schema/", "internal/text", "=drivers", "policies", "plan", "replay/baseline", "view"}

// clockless packages do I/O but read the time only through a clock they
// are given (Config.Clock), so a test or the simulator can move it.
var clockless = []string{"reconcile", "notify"}

// clockFuncs are the functions of package time that read the wall clock
// or wait on it.
var clockFuncs = []string{"Now", "Since", "Until", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Sleep"}

// forbiddenInPure are standard packages a pure package must not import.
var forbiddenInPure = []string{"net", "net/http", "os/exec", "math/rand", "math/rand/v2", "syscall"}

// TestDeps fails when a package imports what DESIGN.md's layout says it
// must not: the arrows of the flow point one way.
func TestDeps(t *testing.T) {
	pkgs := parsePackages(t)
	var names []string
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := pkgs[name]
		rule := ruleFor(name)
		for _, imp := range p.imports {
			if !strings.HasPrefix(imp, module+"/") {
				if isPure(name) && slices.Contains(forbiddenInPure, imp) {
					t.Errorf("%s imports %s: it must do no I/O and use no global randomness", name, imp)
				}
				continue
			}
			rel := strings.TrimPrefix(imp, module+"/")
			if rule != nil && !hasPrefix(rule, rel) {
				t.Errorf("%s imports %s: allowed are %v", name, rel, rule)
			}
		}
		switch {
		case isPure(name):
			for _, pos := range p.clockReads {
				t.Errorf("%s: %s reads the clock; take now as an argument", name, pos)
			}
		case hasPrefix(clockless, name):
			for _, pos := range p.clockReads {
				t.Errorf("%s: %s reads the wall clock; use the clock it is given", name, pos)
			}
		}
	}
}

// TestLoopReachesNoTransport: the loop's package, and every berth
// package it imports, directly or not, imports none of the transports:
// sources, the HTTP surface and the drivers own them.
func TestLoopReachesNoTransport(t *testing.T) {
	pkgs := parsePackages(t)
	seen := map[string]bool{}
	var visit func(name, via string)
	visit = func(name, via string) {
		if seen[name] {
			return
		}
		seen[name] = true
		p := pkgs[name]
		if p == nil {
			t.Fatalf("no package %s", name)
		}
		for _, imp := range p.imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				visit(rel, via+" → "+rel)
				continue
			}
			for _, tr := range transports {
				if imp == tr || (strings.HasSuffix(tr, "/") && strings.HasPrefix(imp, tr)) {
					t.Errorf("%s imports %s", via, imp)
				}
			}
		}
	}
	visit("reconcile", "reconcile")
}

// unreachable lists, for packages as go list names them, the packages
// none of them may reach, directly or through any other package (a
// name holds the packages below it too): the spec types, the
// decision and the drivers see no CUE (only load does), and what is pure
// neither the network nor other processes.
var unreachable = []struct {
	pkgs, not []string
}{
	{[]string{"./schema/...", "./drivers", "./policies/...", "./plan/..."}, []string{"cuelang.org/", "net/http", "os/exec"}},
	{[]string{"./drivers/..."}, []string{"cuelang.org/"}},
}

// TestTypesReachNoLoader: the packages that decide, and the types they
// decide over, reach none of unreachable's packages through any import,
// berth's or another module's, as go list -deps sees them.
func TestTypesReachNoLoader(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the imports with: %v", err)
	}
	for _, u := range unreachable {
		// Each package with its direct imports, then the same for all
		// it reaches.
		args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{.DepOnly}}{{range .Imports}} {{.}}{{end}}"}, u.pkgs...)
		out, err := exec.Command(goTool, args...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		imports := map[string][]string{}
		var roots []string
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			imports[f[0]] = f[2:]
			if f[1] == "false" {
				roots = append(roots, f[0])
			}
		}
		if len(roots) == 0 {
			t.Fatalf("go list %v named no package", u.pkgs)
		}
		for _, root := range roots {
			// Breadth first, so the chain reported is a shortest one.
			via := map[string]string{root: ""}
			queue := []string{root}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				for _, imp := range imports[p] {
					if _, ok := via[imp]; ok {
						continue
					}
					via[imp] = p
					if !hasPrefix(u.not, imp) {
						queue = append(queue, imp)
						continue
					}
					chain := []string{imp}
					for q := p; q != ""; q = via[q] {
						chain = append(chain, q)
					}
					slices.Reverse(chain)
					t.Errorf("%s reaches %s: %s", strings.TrimPrefix(root, module+"/"), imp, strings.Join(chain, " → "))
				}
			}
		}
	}
}

type pkgInfo struct {
	imports    []string
	clockReads []string
}

func parsePackages(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	pkgs := map[string]*pkgInfo{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		p := pkgs[dir]
		if p == nil {
			p = &pkgInfo{}
			pkgs[dir] = p
		}
		for _, is := range f.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			p.imports = append(p.imports, imp)
		}
		if isPure(dir) || hasPrefix(clockless, dir) {
			full, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(full, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && slices.Contains(clockFuncs, sel.Sel.Name) {
					p.clockReads = append(p.clockReads, fset.Position(sel.Pos()).String())
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func ruleFor(pkg string) []string {
	for _, r := range allowed {
		if matches(r.pkg, pkg) {
			if r.berth == nil {
				return []string{}
			}
			return r.berth
		}
	}
	return nil
}

func isPure(pkg string) bool {
	return hasPrefix(pure, pkg)
}

func hasPrefix(prefixes []string, pkg string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return matches(p, pkg) })
}

// matches reports whether pkg is p or below it; "=p" is p alone, and
// "p/" is p or below it.
func matches(p, pkg string) bool {
	if exact, ok := strings.CutPrefix(p, "="); ok {
		return pkg == exact
	}
	p = strings.TrimSuffix(p, "/")
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}
