package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berth-dev/berth/internal/text"
)

// Forges whose commit status berth posts.
const (
	ForgeGitHub = "github"
	ForgeGitLab = "gitlab"
)

// Descriptions' limits: GitHub's API takes 140 characters, GitLab's 255.
const (
	githubDescription = 140
	gitlabDescription = 255
)

// CommitStatus posts the status of each revision berth applies or
// refuses to its commit: GitHub's POST /repos/{owner}/{repo}/statuses/{sha},
// GitLab's POST /projects/:id/statuses/:sha. Success when the revision is
// in force, failure when it is refused, with its errors in the
// description (cut to the API's limit).
type CommitStatus struct {
	// Forge is ForgeGitHub or ForgeGitLab.
	Forge string
	// API is the API's base URL: https://api.github.com (or a GitHub
	// Enterprise server's /api/v3), https://gitlab.com/api/v4.
	API string
	// Repo is the repository: owner/repo on GitHub; on GitLab the
	// project's path (group/project) or numeric id.
	Repo string
	// TokenEnv names the environment variable that holds the API token
	// (GitHub: a token with statuses:write; GitLab: api scope).
	TokenEnv string
	// Context names the status on the commit (default "berth").
	Context string
	// TargetURL, when set, is the status's link; "{sha}" in it is
	// replaced by the commit.
	TargetURL string
	// FullRevision turns a revision's ID into its commit's whole hash
	// (the git source's); nil: the ID is the hash.
	FullRevision func(id string) string
}

// check reports a CommitStatus that cannot post.
func (c *CommitStatus) check() error {
	switch {
	case c.Forge != ForgeGitHub && c.Forge != ForgeGitLab:
		return fmt.Errorf("notify: commit status: forge %q: want github or gitlab", c.Forge)
	case c.Repo == "":
		return fmt.Errorf("notify: commit status: no repository")
	case c.TokenEnv == "":
		return fmt.Errorf("notify: commit status: no token variable")
	}
	if u, err := url.Parse(c.API); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("notify: commit status: the API URL %q is not an http:// or https:// URL", c.API)
	}
	if c.Forge == ForgeGitHub && strings.Count(c.Repo, "/") != 1 {
		return fmt.Errorf("notify: commit status: GitHub repository %q: want owner/repo", c.Repo)
	}
	if c.Context == "" {
		c.Context = "berth"
	}
	return nil
}

// Description is the status's description: the revision in force, or
// the errors that refused it, cut to limit characters with "…".
func Description(ok bool, errs []string, cluster string, limit int) string {
	var s string
	if ok {
		s = "in force"
		if cluster != "" {
			s += " on " + cluster
		}
	} else {
		s = "refused"
		if len(errs) > 0 {
			s += ": " + text.Plural(len(errs), "error") + ": " + strings.Join(errs, "; ")
		}
	}
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return string(r[:limit-1]) + "…"
}

// delivery is the status of revision id: success (ok) or failure with
// errs.
func (c *CommitStatus) delivery(id string, ok bool, errs []string, cfg Config) *delivery {
	sha := id
	if c.FullRevision != nil {
		sha = c.FullRevision(id)
	}
	target := strings.ReplaceAll(c.TargetURL, "{sha}", sha)
	var endpoint string
	var doc map[string]string
	var accept func(int, []byte) bool
	switch c.Forge {
	case ForgeGitLab:
		state := "success"
		if !ok {
			state = "failed"
		}
		endpoint = strings.TrimSuffix(c.API, "/") + "/projects/" + url.PathEscape(c.Repo) + "/statuses/" + url.PathEscape(sha)
		doc = map[string]string{"state": state, "name": c.Context, "description": Description(ok, errs, cfg.Cluster, gitlabDescription)}
		// GitLab refuses a status the commit has already (posted again
		// after a restart): it is there, which is what was asked.
		accept = func(code int, body []byte) bool {
			return code == http.StatusBadRequest && bytes.Contains(body, []byte("Cannot transition status"))
		}
	default:
		state := "success"
		if !ok {
			state = "failure"
		}
		endpoint = strings.TrimSuffix(c.API, "/") + "/repos/" + c.Repo + "/statuses/" + url.PathEscape(sha)
		doc = map[string]string{"state": state, "context": c.Context, "description": Description(ok, errs, cfg.Cluster, githubDescription)}
	}
	if target != "" {
		doc["target_url"] = target
	}
	body, _ := json.Marshal(doc) // a map of strings always encodes
	short := sha
	if len(short) > 12 {
		short = short[:12]
	}
	return &delivery{notifier: "commit-status", what: "the commit status of " + short, accept: accept,
		request: func(time.Time) (*http.Request, []string, error) {
			token := cfg.Getenv(c.TokenEnv)
			if token == "" {
				return nil, nil, fmt.Errorf("the environment variable %s (the %s token) is not set in berth's process", c.TokenEnv, c.Forge)
			}
			req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
			if err != nil {
				return nil, []string{token}, err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", "berth")
			if c.Forge == ForgeGitLab {
				req.Header.Set("PRIVATE-TOKEN", token)
			} else {
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Accept", "application/vnd.github+json")
				req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
			}
			return req, []string{token}, nil
		}}
}
