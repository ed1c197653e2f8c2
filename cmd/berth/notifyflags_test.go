package main

import (
	"strings"
	"testing"
)

// TestCommitStatusFlags: the repository, API and token variable come
// from the git URL of --source unless given; a directory source has no
// commits to post to.
func TestCommitStatusFlags(t *testing.T) {
	tests := map[string]struct {
		forge, source            string
		repo, api, token, errStr string
	}{
		"github https":  {forge: "github", source: "https://github.com/acme/specs.git", repo: "acme/specs", api: "https://api.github.com", token: "GITHUB_TOKEN"},
		"github ssh":    {forge: "github", source: "git@github.com:acme/specs.git", repo: "acme/specs", api: "https://api.github.com", token: "GITHUB_TOKEN"},
		"github server": {forge: "github", source: "https://git.corp.example/acme/specs", repo: "acme/specs", api: "https://git.corp.example/api/v3", token: "GITHUB_TOKEN"},
		"gitlab":        {forge: "gitlab", source: "https://gitlab.example/ml/infra/specs.git", repo: "ml/infra/specs", api: "https://gitlab.example/api/v4", token: "GITLAB_TOKEN"},
		"directory":     {forge: "github", source: "specs", errStr: "needs a git --source"},
		"bad forge":     {forge: "gitea", source: "https://x/a/b", errStr: `--commit-status "gitea": want github or gitlab`},
	}
	for name, tt := range tests {
		f := notifyFlags{timeout: 1, attempts: 1, queue: 1, commitStatus: tt.forge}
		err := f.check(tt.source)
		if tt.errStr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errStr) {
				t.Errorf("%s: %v, want %q", name, err, tt.errStr)
			}
			continue
		}
		if err != nil || f.commitRepo != tt.repo || f.commitAPI != tt.api || f.commitTokenEnv != tt.token {
			t.Errorf("%s: %v: repo %q api %q token %q", name, err, f.commitRepo, f.commitAPI, f.commitTokenEnv)
		}
	}
}
