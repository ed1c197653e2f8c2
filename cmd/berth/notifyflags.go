package main

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/berth-dev/berth/notify"
	"github.com/berth-dev/berth/source/git"
	"github.com/berth-dev/berth/view"
	"github.com/spf13/pflag"
)

// notifyFlags are berth reconcile's flags for notifications: how the
// notifier sends (the routes are the specs' Notification documents), and
// the commit status of each revision on GitHub or GitLab.
type notifyFlags struct {
	timeout  time.Duration
	attempts int
	queue    int

	commitStatus, commitRepo, commitAPI, commitTokenEnv, commitTarget string
}

func (f *notifyFlags) add(fl *pflag.FlagSet) {
	fl.DurationVar(&f.timeout, "notify-timeout", 10*time.Second, "longest one notification request may take before it is cut (and retried)")
	fl.IntVar(&f.attempts, "notify-attempts", 5, "attempts at a notification before it is given up (5xx, 429, unreachable, timeout)")
	fl.IntVar(&f.queue, "notify-queue", 256, "notifications held at once (queued, sending, waiting to retry); more are dropped, counted in berth_notifications_dropped_total")
	fl.StringVar(&f.commitStatus, "commit-status", "", "post each revision's commit status (success when in force, failure when refused) to github or gitlab; needs a git --source")
	fl.StringVar(&f.commitRepo, "commit-status-repo", "", "the repository the statuses go to: owner/repo on GitHub, the project's path or id on GitLab (default: from the --source URL)")
	fl.StringVar(&f.commitAPI, "commit-status-api", "", "the forge's API URL (default https://api.github.com, or https://HOST/api/v4 for GitLab on the --source URL's host)")
	fl.StringVar(&f.commitTokenEnv, "commit-status-token-env", "", "the environment variable holding the API token (default GITHUB_TOKEN or GITLAB_TOKEN)")
	fl.StringVar(&f.commitTarget, "commit-status-target-url", "", "the status's link, such as the dashboard's URL; {sha} is replaced by the commit")
}

// check reports a wrong command line, and fills the commit status's
// defaults from the git URL of --source.
func (f *notifyFlags) check(source string) error {
	if f.timeout <= 0 {
		return usagef("--notify-timeout %s: want a duration above 0", f.timeout)
	}
	if f.attempts < 1 || f.queue < 1 {
		return usagef("--notify-attempts and --notify-queue must be at least 1")
	}
	switch f.commitStatus {
	case "":
		return nil
	case notify.ForgeGitHub, notify.ForgeGitLab:
	default:
		return usagef("--commit-status %q: want github or gitlab", f.commitStatus)
	}
	if !git.IsURL(source) {
		return usagef("--commit-status needs a git --source: a directory's revisions are not commits")
	}
	host, path := repoOf(source)
	if f.commitRepo == "" {
		if path == "" {
			return usagef("--commit-status: cannot tell the repository from --source; give --commit-status-repo")
		}
		f.commitRepo = path
	}
	if f.commitAPI == "" {
		f.commitAPI = "https://api.github.com"
		if f.commitStatus == notify.ForgeGitLab {
			if host == "" {
				host = "gitlab.com"
			}
			f.commitAPI = "https://" + host + "/api/v4"
		} else if host != "" && host != "github.com" {
			f.commitAPI = "https://" + host + "/api/v3" // GitHub Enterprise Server
		}
	}
	if f.commitTokenEnv == "" {
		f.commitTokenEnv = "GITHUB_TOKEN"
		if f.commitStatus == notify.ForgeGitLab {
			f.commitTokenEnv = "GITLAB_TOKEN"
		}
	}
	return nil
}

// repoOf is a git URL's host and repository path (without .git):
// https://github.com/acme/specs.git and git@github.com:acme/specs are
// github.com and acme/specs.
func repoOf(source string) (host, path string) {
	if u, err := url.Parse(source); err == nil && u.Host != "" {
		host, path = u.Hostname(), u.Path
	} else if at, rest, ok := strings.Cut(source, "@"); ok && at != "" {
		host, path, _ = strings.Cut(rest, ":")
	}
	return host, strings.TrimSuffix(strings.Trim(path, "/"), ".git")
}

// startNotifier makes the notifier and runs it in the background until
// ctx ends; its metrics join reg's.
func (f *notifyFlags) startNotifier(ctx context.Context, cluster string, src *openedSource, m *view.Metrics, log *slog.Logger) (*notify.Notifier, error) {
	cfg := notify.Config{Cluster: cluster, Logger: log, Timeout: f.timeout, Attempts: f.attempts, Queue: f.queue, Registerer: m.Registry}
	if f.commitStatus != "" {
		c := &notify.CommitStatus{Forge: f.commitStatus, API: f.commitAPI, Repo: f.commitRepo, TokenEnv: f.commitTokenEnv, TargetURL: f.commitTarget}
		if gs, ok := src.Source.(*git.Source); ok {
			c.FullRevision = func(id string) string {
				full := gs.FullRevision(id)
				if _, hash, ok := strings.Cut(full, "@sha1:"); ok {
					return hash
				}
				return full
			}
		}
		cfg.Commit = c
	}
	n, err := notify.New(cfg)
	if err != nil {
		return nil, &exitError{Code: exitFailure, Err: err}
	}
	go n.Run(ctx)
	return n, nil
}
