package git

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema/schematest"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
)

// testRepo is a git repository in a temporary directory, written with
// go-git; the source reads it through file://, which runs the git binary's
// upload-pack (.ci/run installs git when it is missing).
type testRepo struct {
	t    testing.TB
	dir  string
	repo *gogit.Repository
}

func newTestRepo(t testing.TB) *testRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the file:// transport needs the git binary")
	}
	dir := t.TempDir()
	r, err := gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{InitOptions: gogit.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	return &testRepo{t: t, dir: dir, repo: r}
}

func (r *testRepo) url() string { return "file://" + r.dir }

// commit writes files (a nil content removes the file) and commits them.
func (r *testRepo) commit(msg string, files map[string]string, sign *openpgp.Entity) plumbing.Hash {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if content == "" {
			if _, err := wt.Remove(name); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			r.t.Fatal(err)
		}
	}
	h, err := wt.Commit(msg, &gogit.CommitOptions{AllowEmptyCommits: true, SignKey: sign,
		Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// reset moves the branch to h (as before a force-push).
func (r *testRepo) reset(h plumbing.Hash) {
	r.t.Helper()
	wt, _ := r.repo.Worktree()
	if err := wt.Reset(&gogit.ResetOptions{Commit: h, Mode: gogit.HardReset}); err != nil {
		r.t.Fatal(err)
	}
}

const gitTiers = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: research}
spec:
  tier: medium
  quota: {gpus: 2}
`

func gitWorkspace(name string) string {
	return `apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: ` + name + `, project: research}
spec:
  state: Running
  task: {driver: docker, image: pytorch/pytorch}
  resources: {gpus: 1}
`
}

const twoGPUs = schematest.TwoGPUs

func TestGitSourceReadsCommits(t *testing.T) {
	r := newTestRepo(t)
	c1 := r.commit("one", map[string]string{"specs/tiers.yaml": gitTiers, "README.md": "hi", "specs/.github/ci.yaml": "x"}, nil)
	src := &Source{URL: r.url(), Path: "specs"}
	ctx := t.Context()
	rev, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev.ID != c1.String()[:12] || len(rev.Problems) > 0 {
		t.Fatalf("revision %+v, want %s", rev, c1)
	}
	if _, err := fs.Stat(rev.FS, "tiers.yaml"); err != nil {
		t.Errorf("tiers.yaml under --path: %v", err)
	}
	for _, name := range []string{"README.md", ".github/ci.yaml"} {
		if _, err := fs.Stat(rev.FS, name); err == nil {
			t.Errorf("%s should not be read", name)
		}
	}
	st := src.SourceStatus()
	if st.Branch != "main" || st.LastAttemptedRevision != "main@sha1:"+c1.String() || st.LastFetchedAt.IsZero() {
		t.Errorf("status %+v", st)
	}
	c2 := r.commit("two", map[string]string{"specs/ws.yaml": gitWorkspace("a")}, nil)
	rev, err = src.Read(ctx)
	if err != nil || rev.ID != c2.String()[:12] {
		t.Fatalf("after a new commit: %+v, %v; want %s", rev, err, c2)
	}
	if len(src.SourceStatus().ForcePushes) != 0 {
		t.Errorf("a fast-forward reported as a force-push")
	}
}

func TestGitSourceForcePush(t *testing.T) {
	r := newTestRepo(t)
	c1 := r.commit("one", map[string]string{"tiers.yaml": gitTiers}, nil)
	c2 := r.commit("two", map[string]string{"a.yaml": gitWorkspace("a")}, nil)
	var logs bytes.Buffer
	src := &Source{URL: r.url(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := src.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.reset(c1)
	c3 := r.commit("three, rewritten", map[string]string{"b.yaml": gitWorkspace("b")}, nil)
	rev, err := src.Read(t.Context())
	if err != nil || rev.ID != c3.String()[:12] {
		t.Fatalf("after the force-push: %+v, %v", rev, err)
	}
	fps := src.SourceStatus().ForcePushes
	if len(fps) != 1 || fps[0].From != c2.String() || fps[0].To != c3.String() {
		t.Errorf("force-pushes %+v, want %s → %s", fps, c2, c3)
	}
	if !strings.Contains(logs.String(), "force-push") {
		t.Errorf("not logged:\n%s", logs.String())
	}
}

func TestGitSourceBranchAndPathProblems(t *testing.T) {
	r := newTestRepo(t)
	r.commit("one", map[string]string{"tiers.yaml": gitTiers}, nil)
	_, err := (&Source{URL: r.url(), Branch: "nope"}).Read(t.Context())
	if err == nil || !strings.Contains(err.Error(), `branch "nope" not found`) {
		t.Errorf("missing branch: %v", err)
	}
	rev, err := (&Source{URL: r.url(), Path: "nowhere"}).Read(t.Context())
	if err != nil || len(rev.Problems) != 1 || !strings.Contains(rev.Problems[0], `no directory "nowhere"`) {
		t.Errorf("missing path: %+v, %v", rev.Problems, err)
	}
	src := &Source{URL: "file://" + filepath.Join(t.TempDir(), "gone")}
	if _, err := src.Read(t.Context()); err == nil {
		t.Errorf("unreachable remote read without error")
	}
	if src.SourceStatus().FetchError == "" {
		t.Errorf("status does not say the fetch failed")
	}
}

// Secrets never appear in errors, status or logs, even when the server
// refuses them, whatever form the URL gives them in.
func TestGitSourceSecretsStayOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	closed := httptest.NewServer(http.NotFoundHandler())
	closedHost := strings.TrimPrefix(closed.URL, "http://")
	closed.Close() // a port nothing listens on: the fetch fails to connect
	const token, urlPass, urlToken = "ghp_supersecrettoken123", "urlpassword987", "ghp_urlTokenAsUser456"
	tests := map[string]struct {
		url     string
		auth    Auth
		secrets []string
		shown   string // what the status shows of the URL
	}{
		"password in the URL, token from a file": {url: "http://bot:" + urlPass + "@" + host + "/org/repo.git", auth: Auth{Password: token},
			secrets: []string{token, urlPass}, shown: "bot:***@"},
		"token as the user name": {url: "http://" + urlToken + "@" + host + "/org/repo.git",
			secrets: []string{urlToken}, shown: "http://***@"},
		"token as the user name, unreachable": {url: "http://" + urlToken + "@" + closedHost + "/org/repo.git",
			secrets: []string{urlToken}, shown: "http://***@"},
		"git:// token, unreachable": {url: "git://" + urlToken + "@" + closedHost + "/org/repo.git",
			secrets: []string{urlToken}, shown: "git://***@"},
		"token in the query": {url: "http://" + host + "/org/repo.git?private_token=" + urlToken,
			secrets: []string{urlToken}, shown: "private_token=***"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			src := &Source{URL: tt.url, Auth: tt.auth, Logger: log}
			spec, _ := sim.Parse([]byte(twoGPUs))
			c := sim.New(*spec, sim.NewScaledClock(1))
			l, err := reconcile.New(reconcile.Config{Source: src, Cluster: c, Store: c, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Once(t.Context())
			if err == nil {
				t.Fatal("a refused fetch succeeded")
			}
			st := l.Status()
			status, jerr := json.Marshal(st)
			if jerr != nil {
				t.Fatal(jerr)
			}
			for what, text := range map[string]string{"error": err.Error(), "status": string(status), "logs": logs.String()} {
				for _, secret := range tt.secrets {
					if strings.Contains(text, secret) {
						t.Errorf("%s shows a secret:\n%s", what, text)
					}
				}
			}
			if st.Source == nil || st.Source.FetchError == "" || !strings.Contains(st.Source.URL, tt.shown) {
				t.Errorf("source status %+v", st.Source)
			}
			if len(c.Applied()) != 0 {
				t.Errorf("the cluster was touched: %v", c.Applied())
			}
		})
	}
}

func TestGitSourceVerifyKeys(t *testing.T) {
	r := newTestRepo(t)
	key, err := openpgp.NewEntity("berth", "", "berth@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ring bytes.Buffer
	w, _ := armor.Encode(&ring, openpgp.PublicKeyType, nil)
	key.Serialize(w)
	w.Close()
	r.commit("signed", map[string]string{"tiers.yaml": gitTiers}, key)
	src := &Source{URL: r.url(), VerifyKeys: ring.String()}
	rev, err := src.Read(t.Context())
	if err != nil || len(rev.Problems) != 0 {
		t.Fatalf("signed commit: %v %v", rev.Problems, err)
	}
	r.commit("unsigned", map[string]string{"a.yaml": gitWorkspace("a")}, nil)
	rev, err = src.Read(t.Context())
	if err != nil || len(rev.Problems) != 1 || !strings.Contains(rev.Problems[0], "not signed") {
		t.Fatalf("unsigned commit: %v %v", rev.Problems, err)
	}
	other, _ := openpgp.NewEntity("mallory", "", "m@example.com", nil)
	r.commit("signed by another key", map[string]string{"b.yaml": gitWorkspace("b")}, other)
	rev, _ = src.Read(t.Context())
	if len(rev.Problems) != 1 || !strings.Contains(rev.Problems[0], "not verified") {
		t.Fatalf("commit signed by an unknown key: %v", rev.Problems)
	}
}

// The loop over a git repository: a new commit is applied, an invalid one
// refused with the last good kept, and the status says both like Flux.
func TestLoopOverGit(t *testing.T) {
	r := newTestRepo(t)
	c1 := r.commit("one", map[string]string{"tiers.yaml": gitTiers, "a.yaml": gitWorkspace("a")}, nil)
	spec, _ := sim.Parse([]byte(twoGPUs))
	c := sim.New(*spec, sim.NewScaledClock(1))
	src := &Source{URL: r.url()}
	l, err := reconcile.New(reconcile.Config{Source: src, Cluster: c, Store: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := l.Once(ctx)
	if err != nil || res.Revision != c1.String()[:12] || len(res.Applied) != 1 {
		t.Fatalf("first commit: %+v %v", res, err)
	}
	c2 := r.commit("two", map[string]string{"b.yaml": gitWorkspace("b")}, nil)
	res, err = l.Once(ctx)
	if err != nil || res.Revision != c2.String()[:12] || len(res.Applied) == 0 || res.Applied[0].Workspace.Name != "b" || res.Applied[0].Kind.String() != "start" {
		t.Fatalf("second commit: %+v %v", res, err)
	}
	c3 := r.commit("broken", map[string]string{"c.yaml": strings.Replace(gitWorkspace("c"), "research", "nowhere", 1)}, nil)
	res, err = l.Once(ctx)
	if err != nil || res.Revision != c2.String()[:12] || res.Refused == nil {
		t.Fatalf("invalid commit: %+v %v", res, err)
	}
	st := l.Status().Source
	if st.LastAppliedRevision != "main@sha1:"+c2.String() || st.LastAttemptedRevision != "main@sha1:"+c3.String() || len(st.LastAttemptErrors) == 0 {
		t.Errorf("source status %+v", st)
	}
	// A rename is invisible: same workspaces, no stop.
	r.commit("rename", map[string]string{"c.yaml": "", "b.yaml": "", "renamed-b.yaml": gitWorkspace("b")}, nil)
	res, err = l.Once(ctx)
	if err != nil || res.Refused != nil {
		t.Fatalf("rename: %+v %v", res, err)
	}
	for _, a := range res.Applied {
		if a.Kind.String() == "stop" {
			t.Errorf("renaming a file stopped %s", a.Workspace)
		}
	}
}

func TestGitSourceFetchEveryAndPoke(t *testing.T) {
	r := newTestRepo(t)
	c1 := r.commit("one", map[string]string{"tiers.yaml": gitTiers}, nil)
	src := &Source{URL: r.url(), FetchEvery: time.Hour}
	if rev, _ := src.Read(t.Context()); rev.ID != c1.String()[:12] {
		t.Fatalf("first read %s", rev.ID)
	}
	c2 := r.commit("two", map[string]string{"a.yaml": gitWorkspace("a")}, nil)
	if rev, _ := src.Read(t.Context()); rev.ID != c1.String()[:12] {
		t.Errorf("fetched again within FetchEvery: %s", rev.ID)
	}
	src.Poke()
	if rev, _ := src.Read(t.Context()); rev.ID != c2.String()[:12] {
		t.Errorf("a poke did not fetch: %s, want %s", rev.ID, c2)
	}
}

func TestGitSourceSSHAuth(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	const passphrase = "correct horse battery"
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	if err != nil {
		t.Fatal(err)
	}
	key := pem.EncodeToMemory(block)
	// Port 1 on localhost refuses at once: every test fails before talking.
	const url = "ssh://git@127.0.0.1:1/org/specs.git"

	// Host keys are checked by default: a known_hosts file that is not
	// there is an error that says what to do.
	src := &Source{URL: url, Auth: Auth{SSHKey: key, SSHKeyPassphrase: passphrase, KnownHosts: filepath.Join(t.TempDir(), "known_hosts")}}
	_, err = src.Read(t.Context())
	if err == nil || !strings.Contains(err.Error(), "--git-known-hosts") {
		t.Errorf("missing known_hosts: %v", err)
	}
	// A wrong passphrase is reported without the passphrase.
	src = &Source{URL: url, Auth: Auth{SSHKey: key, SSHKeyPassphrase: "wrong passphrase", InsecureIgnoreHostKey: true}}
	_, err = src.Read(t.Context())
	if err == nil || !strings.Contains(err.Error(), "ssh key") || strings.Contains(err.Error(), "wrong passphrase") {
		t.Errorf("wrong passphrase: %v", err)
	}
	// Turning host key checks off warns on every fetch.
	var logs bytes.Buffer
	src = &Source{URL: "git@127.0.0.1:org/specs.git", Auth: Auth{SSHKey: key, SSHKeyPassphrase: passphrase, InsecureIgnoreHostKey: true},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	src.Read(t.Context())
	src.Read(t.Context())
	if n := strings.Count(logs.String(), "host key checking is OFF"); n != 2 {
		t.Errorf("%d warnings over 2 fetches, want 2:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), passphrase) || strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("the logs show the key or its passphrase")
	}
}

func TestIsGitURL(t *testing.T) {
	for src, want := range map[string]bool{
		"https://github.com/org/specs.git": true, "ssh://git@host/org/specs.git": true, "git@github.com:org/specs.git": true,
		"file:///srv/specs": true, "./specs": false, "/srv/specs": false, "specs": false, "C:/specs": false,
	} {
		if got := IsURL(src); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://bot:tok3n@host/org/r.git":         "https://bot:***@host/org/r.git",
		"https://ghp_T0KEN@github.com/org/r.git":   "https://***@github.com/org/r.git",
		"http://ghp_T0KEN@host:8080/org/r.git":     "http://***@host:8080/org/r.git",
		"git://T0KEN@host/org/r.git":               "git://***@host/org/r.git",
		"https://x-access-token:T0K@host/r.git":    "https://x-access-token:***@host/r.git",
		"https://bot:p%40ss@host/r.git":            "https://bot:***@host/r.git",
		"https://host/r.git?private_token=T0K&a=b": "https://host/r.git?a=***&private_token=***",
		"ssh://git@host/org/r.git":                 "ssh://git@host/org/r.git",
		"ssh://git:pw@host/org/r.git":              "ssh://git:***@host/org/r.git",
		"git@github.com:org/r.git":                 "git@github.com:org/r.git",
		"https://github.com/org/r.git":             "https://github.com/org/r.git",
		"file:///srv/specs":                        "file:///srv/specs",
		"https://T0KEN@host/r.git#frag":            "https://***@host/r.git",
		"https://user:%zz@host/r.git":              "(unparsable URL)",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestGitServerThatNeverAnswers: a git server that accepts connections
// and never answers is cut at the source's Timeout, over http and git://,
// with an error that says so (before, the loop froze with no log line).
func TestGitServerThatNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 16)
	defer func() {
		ln.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // never answered
		}
	}()
	for _, u := range []string{"http://" + ln.Addr().String() + "/specs.git", "git://" + ln.Addr().String() + "/specs.git"} {
		s := &Source{URL: u, Timeout: 50 * time.Millisecond}
		_, err := s.Read(t.Context())
		var ge *Error
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), "no answer from the git server within 50ms: cut (git timeout)") {
			t.Errorf("%s: Read = %v, want a Error saying it was cut", u, err)
		}
		if st := s.SourceStatus(); !strings.Contains(st.FetchError, "within 50ms") {
			t.Errorf("%s: status fetch error %q", u, st.FetchError)
		}
	}
}

// TestGitSourceShallowAndSpecFilesOnly: the clone is shallow (a large blob
// in an older commit is never fetched), only the files the loader reads
// are in the revision, a link stays a link the loader follows only inside
// the tree, and a spec file over the limit is a problem, not read.
func TestGitSourceShallowAndSpecFilesOnly(t *testing.T) {
	r := newTestRepo(t)
	big := strings.Repeat("x", 1<<20)
	r.commit("one", map[string]string{"assets/model.bin": big, "tiers.yaml": gitTiers}, nil)
	old := plumbing.ComputeHash(plumbing.BlobObject, []byte(big))
	r.commit("two", map[string]string{"assets/model.bin": "", "notes.txt": "hello", "docs/README.md": "x"}, nil)
	if err := os.Symlink("tiers.yaml", filepath.Join(r.dir, "alias.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(r.dir, "passwd.yaml")); err != nil {
		t.Fatal(err)
	}
	r.commit("huge", map[string]string{"huge.yaml": "# " + strings.Repeat("y", load.DefaultMaxFileBytes) + "\n"}, nil)
	wt, _ := r.repo.Worktree()
	for _, n := range []string{"alias.yaml", "passwd.yaml"} {
		if _, err := wt.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	c3 := r.commit("links", nil, nil)
	src := &Source{URL: r.url()}
	rev, err := src.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rev.ID != c3.String()[:12] {
		t.Fatalf("read %s, want %s", rev.ID, c3)
	}
	if _, err := src.repo.BlobObject(old); err == nil {
		t.Error("the clone holds a blob of an older commit: it is not shallow")
	}
	var names []string
	fs.WalkDir(rev.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if diff := cmp.Diff([]string{"alias.yaml", "passwd.yaml", "tiers.yaml"}, names); diff != "" {
		t.Errorf("files in the revision (-want +got):\n%s", diff)
	}
	if len(rev.Problems) != 1 || !strings.Contains(rev.Problems[0], "huge.yaml: not read") {
		t.Errorf("problems %q, want huge.yaml over the limit", rev.Problems)
	}
	rep, err := load.CheckFS(rev.FS, rev.Root)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, d := range rep.Diagnostics {
		msgs = append(msgs, d.String())
	}
	all := strings.Join(msgs, "\n")
	if !strings.Contains(all, "passwd.yaml: not read: it is a symbolic link to ") || !strings.Contains(all, "passwd, outside the spec tree") || !strings.Contains(all, "duplicate PriorityTier") {
		t.Errorf("links in the revision: got\n%s", all)
	}
}

// gitCLI runs git in dir (a repository written with the git binary, so a
// large file never passes through this process's memory).
func gitCLI(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// writeBlob writes a file of size bytes that git cannot compress much
// (seeded, so the same every run).
func writeBlob(t testing.TB, p string, size int64) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, rand.NewChaCha8([32]byte{byte(size)}), size); err != nil {
		t.Fatal(err)
	}
}

// peakRSS resets the process's peak resident set size (VmHWM) and returns
// a func that reads it in bytes; ok is false where Linux's /proc cannot.
func peakRSS() (read func() int64, ok bool) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return nil, false
	}
	return func() int64 {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return -1
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				return kb << 10
			}
		}
		return -1
	}, true
}

// A blob outside the spec path and one inside over the per-file limit:
// neither stays in memory. The clone is on disk, the one outside is never
// read, the one inside is refused by its size before its content is read.
// BERTH_GIT_BLOB_MB sets the blobs' size (default 48; the README's figure
// is 300) and logs the peak RSS of the Read.
func TestGitSourceLargeBlobsStayOutOfMemory(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git binary")
	}
	mb := int64(48)
	if v := os.Getenv("BERTH_GIT_BLOB_MB"); v != "" {
		mb, _ = strconv.ParseInt(v, 10, 64)
	}
	dir := t.TempDir()
	gitCLI(t, dir, "init", "-q")
	os.MkdirAll(filepath.Join(dir, "specs"), 0o755)
	os.WriteFile(filepath.Join(dir, "specs", "tiers.yaml"), []byte(gitTiers), 0o644)
	writeBlob(t, filepath.Join(dir, "assets", "model.bin"), mb<<20)
	writeBlob(t, filepath.Join(dir, "specs", "dump.yaml"), mb<<20)
	gitCLI(t, dir, "add", "-A")
	gitCLI(t, dir, "commit", "-q", "-m", "blobs")

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak, havePeak := peakRSS()
	src := &Source{URL: "file://" + dir, Path: "specs"}
	t.Cleanup(func() { src.Close() })
	rev, err := src.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	if havePeak {
		t.Logf("peak RSS of the test process while reading: %d MiB (blobs of %d MiB)", peak()>>20, mb)
	}
	want := []string{"specs/dump.yaml: not read: " + load.FileTooLarge(mb<<20, load.DefaultMaxFileBytes)}
	if diff := cmp.Diff(want, rev.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if _, ok := rev.FS.(fstest.MapFS)["tiers.yaml"]; !ok {
		t.Errorf("tiers.yaml not read: %v", rev.FS)
	}
	// What the Read keeps: the heap in use right after it (the clone is on
	// disk; a blob held in memory shows here).
	if grown := int64(during.HeapInuse) - int64(before.HeapInuse); grown > mb<<20/4 {
		t.Errorf("the heap grew by %d MiB reading a commit with two blobs of %d MiB: a blob is kept in memory", grown>>20, mb)
	}
	runtime.KeepAlive(src)
}

// The git source reads a commit within the limits it is given, as the
// loader reads a directory: a file over the per-file limit and the files
// past the per-tree one are named, unread.
func TestGitSourceLimits(t *testing.T) {
	r := newTestRepo(t)
	pad := func(n int) string { return gitTiers + "# " + strings.Repeat("x", n-len(gitTiers)-3) + "\n" }
	r.commit("specs", map[string]string{"specs/a.yaml": pad(1536), "specs/b.yaml": pad(900), "specs/c.yaml": pad(900), "specs/d.yaml": pad(900), "specs/e.yaml": pad(900)}, nil)
	src := &Source{URL: r.url(), Path: "specs", Limits: load.Limits{FileBytes: 1 << 10, TreeBytes: 2 << 10}}
	t.Cleanup(func() { src.Close() })
	rev, err := src.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"specs/a.yaml: not read: the file is too large (1.5 KiB, more than the limit of 1 KiB per file); split it into smaller files, or raise the limit with --max-file-size",
		"specs/d.yaml: not read, nor any file after it: the spec tree holds more than the limit of 2 KiB of *.yaml, *.yml and *.cue files; split the tree, leave files out with .berthignore, or raise the limit with --max-tree-size",
	}
	if diff := cmp.Diff(want, rev.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	var names []string
	for n := range rev.FS.(fstest.MapFS) {
		names = append(names, n)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"b.yaml", "c.yaml"}, names); diff != "" {
		t.Errorf("files read (-want +got):\n%s", diff)
	}
}

// Close removes the clone; a Read after it clones again.
func TestGitSourceCloseRemovesTheClone(t *testing.T) {
	r := newTestRepo(t)
	r.commit("one", map[string]string{"tiers.yaml": gitTiers}, nil)
	dir := filepath.Join(t.TempDir(), "clone")
	src := &Source{URL: r.url(), Dir: dir}
	if _, err := src.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) == 0 {
		t.Fatalf("the clone is not in %s", dir)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("after Close, %s holds %d entries", dir, len(entries))
	}
	if rev, err := src.Read(t.Context()); err != nil || rev.ID == "" {
		t.Errorf("Read after Close: %v, %v", rev.ID, err)
	}
	src.Close()
}

// A clone that fails leaves nothing in the temporary directory, and Close
// removes a good one's.
func TestGitSourceTempDirRemoved(t *testing.T) {
	r := newTestRepo(t)
	r.commit("one", map[string]string{"tiers.yaml": gitTiers}, nil)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if _, err := (&Source{URL: r.url(), Branch: "nope"}).Read(t.Context()); err == nil {
		t.Fatal("a missing branch read")
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("a failed clone left %d entries in $TMPDIR", len(entries))
	}
	src := &Source{URL: r.url()}
	if _, err := src.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Errorf("a clone made %d entries in $TMPDIR, want 1", len(entries))
	}
	src.Close()
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("after Close, $TMPDIR holds %d entries", len(entries))
	}
}

// TestGitSourcePacksBounded: each fetch that brings commits writes a pack
// into the clone, and the packs keep every object fetched since (a large
// blob that has left HEAD too): a reconciler fetching for weeks would
// fill its disk. Past maxGitPacks the next fetch clones afresh, shallow,
// and removes the old clone; the revisions read stay right and the fresh
// clone is no force-push.
func TestGitSourcePacksBounded(t *testing.T) {
	r := newTestRepo(t)
	r.commit("one", map[string]string{"specs/tiers.yaml": gitTiers}, nil)
	dir := filepath.Join(t.TempDir(), "clone")
	src := &Source{URL: r.url(), Path: "specs", Dir: dir}
	defer src.Close()
	packs := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
		return len(m)
	}
	most := 0
	for i := range maxGitPacks + 5 {
		c := r.commit(fmt.Sprint("commit ", i), map[string]string{"specs/ws.yaml": gitWorkspace(fmt.Sprint("w", i))}, nil)
		rev, err := src.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if rev.ID != c.String()[:12] {
			t.Fatalf("read %d: revision %s, want %s", i, rev.ID, c)
		}
		b, err := fs.ReadFile(rev.FS, "ws.yaml")
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("name: w%d,", i)) {
			t.Fatalf("read %d: ws.yaml %q, %v", i, b, err)
		}
		most = max(most, packs())
	}
	if most > maxGitPacks+1 {
		t.Errorf("the clone held %d packs at most, want ≤ %d", most, maxGitPacks+1)
	}
	if n := packs(); n >= maxGitPacks {
		t.Errorf("after %d fetches the clone holds %d packs: never cloned afresh", maxGitPacks+5, n)
	}
	if fp := src.SourceStatus().ForcePushes; len(fp) != 0 {
		t.Errorf("fresh clones reported as force-pushes: %+v", fp)
	}
}

// TestWebhookApplies: a pushed commit is applied once its webhook comes,
// on the simulator, with the loop's interval and the source's fetch an
// hour away (how soon is BenchmarkWebhookApply's: target 1 s).
func TestWebhookApplies(t *testing.T) {
	push := webhookLoop(t)
	for i, name := range []string{"b", "c", "d"} {
		took := push(name)
		t.Logf("push %d: applied %s after the webhook", i+1, took.Round(time.Millisecond))
	}
}

// BenchmarkWebhookApply measures how long a pushed commit takes to be in
// force after its webhook (ms/push; target 1 s).
func BenchmarkWebhookApply(b *testing.B) {
	push := webhookLoop(b)
	var total time.Duration
	n := 0
	for b.Loop() {
		total += push(fmt.Sprintf("w%d", n))
		n++
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(n), "ms/push")
}

// webhookLoop runs a loop over a git source that fetches only when its
// webhook pokes it, and returns push: commit a workspace named name, send
// the signed webhook, and return how long the commit took to be in force
// (tb fails after 5 s: the interval is an hour).
func webhookLoop(tb testing.TB) (push func(name string) time.Duration) {
	r := newTestRepo(tb)
	r.commit("one", map[string]string{"tiers.yaml": gitTiers, "a.yaml": gitWorkspace("a")}, nil)
	spec, _ := sim.Parse([]byte(twoGPUs))
	c := sim.New(*spec, sim.NewScaledClock(1))
	changes := make(chan struct{}, 1)
	secret := []byte("hook-secret-of-at-least-32-bytes!")
	src := &Source{URL: r.url(), FetchEvery: time.Hour}
	hook := &api.Webhook{Secret: secret, Trigger: func() {
		src.Poke()
		select {
		case changes <- struct{}{}:
		default:
		}
	}}
	// Settle is short, as in berth reconcile: cycles come often, but the
	// source fetches only when poked (or hourly).
	l, err := reconcile.New(reconcile.Config{Source: src, Cluster: c, Store: c,
		Interval: time.Hour, Debounce: 10 * time.Millisecond, Settle: 50 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler(l, hook.Routes))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx, changes) }()
	tb.Cleanup(func() { cancel(); <-done; srv.Close() })
	waitFor(tb, 5*time.Second, func() bool { st := l.Status(); return st.Revision != nil })
	return func(name string) time.Duration {
		h := r.commit("push "+name, map[string]string{name + ".yaml": gitWorkspace(name)}, nil)
		body := `{"ref":"refs/heads/main","after":"` + h.String() + `"}`
		start := time.Now()
		req, _ := http.NewRequest("POST", srv.URL+api.WebhookPath, strings.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", api.SignGitHub(secret, []byte(body)))
		req.Header.Set("X-GitHub-Event", "push")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			tb.Fatalf("webhook: %v %v", resp, err)
		}
		resp.Body.Close()
		waitFor(tb, 5*time.Second, func() bool { st := l.Status(); return st.Revision != nil && st.Revision.ID == h.String()[:12] })
		return time.Since(start)
	}
}

func waitFor(t testing.TB, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
