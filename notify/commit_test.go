package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeForge is a local GitHub or GitLab statuses API: it records each
// status posted, and answers as the API does.
type fakeForge struct {
	mu       sync.Mutex
	posts    []forgePost
	srv      *httptest.Server
	answer   int
	response string
}

type forgePost struct {
	Path, Token string
	Doc         map[string]string
}

func newForge(t *testing.T, tokenHeader string) *fakeForge {
	f := &fakeForge{answer: http.StatusCreated}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var doc map[string]string
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &doc) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.posts = append(f.posts, forgePost{Path: r.URL.EscapedPath(), Token: r.Header.Get(tokenHeader), Doc: doc})
		code, resp := f.answer, f.response
		f.mu.Unlock()
		w.WriteHeader(code)
		io.WriteString(w, resp)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// got are the statuses posted, by path (the workers send in any order).
func (f *fakeForge) got() []forgePost {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.posts)
	slices.SortFunc(out, func(a, b forgePost) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// runCommit sends the statuses of one applied and one refused revision
// through a Notifier over the real network to forge.
func runCommit(t *testing.T, c *CommitStatus) *Notifier {
	t.Helper()
	n, err := New(Config{Cluster: "lab", Commit: c, Registerer: prometheus.NewRegistry(),
		Getenv: func(k string) string { return map[string]string{"FORGE_TOKEN": "tok-123"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	long := []string{"specs/a.yaml:3:9: spec.tier: there is no PriorityTier \"hgih\"; did you mean \"high\"?", "specs/b.yaml:7:3: spec.resources.gpus: -1 is out of range: gpus is a whole number from 0 to 1024"}
	n.News(view.News{Applied: &view.RevisionStatus{ID: "abc1234", LoadedAt: at}})
	n.News(view.News{Refused: &view.RevisionStatus{ID: "def5678", LoadedAt: at, Errors: long}})
	return n
}

var fullSHA = map[string]string{"abc1234": "abc1234" + strings.Repeat("0", 33), "def5678": "def5678" + strings.Repeat("1", 33)}

// TestCommitStatusGitHub: success when applied, failure when refused
// with its errors cut to 140 characters, the target URL, the bearer
// token, on the commit's whole hash.
func TestCommitStatusGitHub(t *testing.T) {
	gh := newForge(t, "Authorization")
	n := runCommit(t, &CommitStatus{Forge: ForgeGitHub, API: gh.srv.URL, Repo: "acme/specs", TokenEnv: "FORGE_TOKEN",
		TargetURL: "https://berth.example/#rev={sha}", FullRevision: func(id string) string { return fullSHA[id] }})
	waitFor(t, "two statuses", func() bool { return len(gh.got()) == 2 })
	refusedDesc := "refused: 2 errors: specs/a.yaml:3:9: spec.tier: there is no PriorityTier \"hgih\"; did you mean \"high\"?; specs/b.yaml:7:3: spec.resources.gpu…"
	want := []forgePost{
		{Path: "/repos/acme/specs/statuses/" + fullSHA["abc1234"], Token: "Bearer tok-123",
			Doc: map[string]string{"state": "success", "context": "berth", "description": "in force on lab", "target_url": "https://berth.example/#rev=" + fullSHA["abc1234"]}},
		{Path: "/repos/acme/specs/statuses/" + fullSHA["def5678"], Token: "Bearer tok-123",
			Doc: map[string]string{"state": "failure", "context": "berth", "description": refusedDesc, "target_url": "https://berth.example/#rev=" + fullSHA["def5678"]}},
	}
	if diff := cmp.Diff(want, gh.got()); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
	if n := len([]rune(refusedDesc)); n != 140 {
		t.Errorf("the description has %d characters, want 140 (GitHub's limit)", n)
	}
	waitFor(t, "counted", func() bool { return counter(t, n.send.sent, "commit-status") == 2 })
}

// TestCommitStatusGitLab: GitLab's states (success, failed), its
// PRIVATE-TOKEN, the project's path escaped as one segment, and a status
// the commit already has taken as done.
func TestCommitStatusGitLab(t *testing.T) {
	gl := newForge(t, "PRIVATE-TOKEN")
	n := runCommit(t, &CommitStatus{Forge: ForgeGitLab, API: gl.srv.URL + "/api/v4", Repo: "acme/ml/specs", TokenEnv: "FORGE_TOKEN"})
	waitFor(t, "two statuses", func() bool { return len(gl.got()) == 2 })
	got := gl.got()
	if got[0].Path != "/api/v4/projects/acme%2Fml%2Fspecs/statuses/abc1234" || got[0].Token != "tok-123" ||
		got[0].Doc["state"] != "success" || got[0].Doc["name"] != "berth" {
		t.Errorf("applied: %+v", got[0])
	}
	if got[1].Doc["state"] != "failed" || !strings.HasPrefix(got[1].Doc["description"], "refused: 2 errors: specs/a.yaml:3:9") || len([]rune(got[1].Doc["description"])) > 255 {
		t.Errorf("refused: %+v", got[1])
	}
	waitFor(t, "counted", func() bool { return counter(t, n.send.sent, "commit-status") == 2 })

	again := newForge(t, "PRIVATE-TOKEN")
	again.answer, again.response = http.StatusBadRequest, `{"message":"Cannot transition status via :success from :success"}`
	n = runCommit(t, &CommitStatus{Forge: ForgeGitLab, API: again.srv.URL, Repo: "7", TokenEnv: "FORGE_TOKEN"})
	waitFor(t, "taken as done", func() bool { return counter(t, n.send.sent, "commit-status") == 2 })
}

// TestDescription: cut to the limit with an ellipsis, counting
// characters, not bytes.
func TestDescription(t *testing.T) {
	d := Description(false, []string{strings.Repeat("é", 300)}, "", 140)
	if n := len([]rune(d)); n != 140 || !strings.HasSuffix(d, "…") {
		t.Errorf("%d characters: %q", n, d)
	}
	if d := Description(true, nil, "", 140); d != "in force" {
		t.Errorf("applied: %q", d)
	}
}
