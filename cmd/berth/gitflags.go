package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/source/git"
	"github.com/spf13/pflag"
)

// sourceFlags are the flags of `berth reconcile` that pick and reach the
// specs: a local directory (watched) or a git URL (cloned and fetched),
// with its credentials, and the deletion-safety knobs. Secrets come from
// files or the environment, never from the command line.
type sourceFlags struct {
	branch, path              string
	tokenFile, username       string
	sshKey, sshPassphraseFile string
	knownHosts                string
	insecureHostKey           bool
	verifyKeys                string
	webhookSecretFile         string
	pruneDelay                time.Duration
	gitTimeout                time.Duration
}

// Environment variables that hold secrets.
const (
	envGitToken         = "BERTH_GIT_TOKEN"
	envGitSSHPassphrase = "BERTH_GIT_SSH_PASSPHRASE"
	envWebhookSecret    = "BERTH_WEBHOOK_SECRET"
)

func (f *sourceFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.branch, "branch", "", "git branch to follow (default: the remote's HEAD)")
	fl.StringVar(&f.path, "path", "", "directory of the repository that holds the specs")
	fl.StringVar(&f.tokenFile, "git-token-file", "", "file holding an https token or password (or $"+envGitToken+")")
	fl.StringVar(&f.username, "git-username", "", "https user name for the token (default git)")
	fl.StringVar(&f.sshKey, "git-ssh-key", "", "ssh private key file for ssh URLs (default: the ssh agent)")
	fl.StringVar(&f.sshPassphraseFile, "git-ssh-passphrase-file", "", "file holding the ssh key's passphrase (or $"+envGitSSHPassphrase+")")
	fl.StringVar(&f.knownHosts, "git-known-hosts", "", "known_hosts file ssh host keys are checked against (default ~/.ssh/known_hosts)")
	fl.BoolVar(&f.insecureHostKey, "git-insecure-skip-host-key-check", false, "do not check ssh host keys (insecure; warns on every fetch)")
	fl.StringVar(&f.verifyKeys, "verify-keys", "", "armored OpenPGP public keys; apply only commits signed by one of them")
	fl.StringVar(&f.webhookSecretFile, "webhook-secret-file", "", "file holding the git webhook secret (or $"+envWebhookSecret+"); enables POST "+api.WebhookPath)
	fl.DurationVar(&f.gitTimeout, "git-timeout", git.DefaultTimeout, "longest a git clone or fetch may take before it is cut (the last good revision stays in force)")
	fl.DurationVar(&f.pruneDelay, "prune-delay", plan.DefaultPruneDelay, "how long a workspace removed from the specs stays stopped before its job is purged")
}

// openedSource is the source the loop reads, and the directory to watch
// when it is a local one.
type openedSource struct {
	Source   source.Source
	WatchDir string
	Name     string
}

// open returns the source --source names: a git URL is cloned; anything
// else is a local directory (a git working tree too), watched.
func (f *sourceFlags) open(from string, interval time.Duration, limits load.Limits, log *slog.Logger) (*openedSource, error) {
	if !git.IsURL(from) {
		dir := from
		if f.path != "" {
			dir = filepath.Join(from, f.path)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, usagef("--source %s: not a directory or a git URL (https://, ssh://, git@host:org/repo.git, file://)", dir)
		}
		return &openedSource{Source: source.NewDirSource(dir), WatchDir: dir, Name: dir}, nil
	}
	auth := git.Auth{Username: f.username, KnownHosts: f.knownHosts, InsecureIgnoreHostKey: f.insecureHostKey}
	var err error
	if auth.Password, err = secret(f.tokenFile, envGitToken); err != nil {
		return nil, err
	}
	if f.sshKey != "" {
		if auth.SSHKey, err = os.ReadFile(f.sshKey); err != nil {
			return nil, &exitError{Code: exitFailure, Err: fmt.Errorf("--git-ssh-key: %w", err)}
		}
	}
	if auth.SSHKeyPassphrase, err = secret(f.sshPassphraseFile, envGitSSHPassphrase); err != nil {
		return nil, err
	}
	warnSecrets(log, from, auth.Password != "")
	src := &git.Source{URL: from, Branch: f.branch, Path: f.path, Auth: auth, Logger: log, FetchEvery: interval, Timeout: f.gitTimeout, Limits: limits}
	if f.verifyKeys != "" {
		b, err := os.ReadFile(f.verifyKeys)
		if err != nil {
			return nil, &exitError{Code: exitFailure, Err: fmt.Errorf("--verify-keys: %w", err)}
		}
		src.VerifyKeys = string(b)
	}
	return &openedSource{Source: src, Name: git.RedactURL(from)}, nil
}

// warnSecrets warns about credentials exposed by how they were given: in
// the --source URL, where every user of the machine reads them with ps
// (and in shell history), and over plain http://, where anyone on the
// path reads them off the wire. withToken: a token or password was given
// from a file or the environment.
func warnSecrets(log *slog.Logger, source string, withToken bool) {
	inURL := git.HasURLCredential(source)
	if u, err := url.Parse(source); err == nil && withToken && u.User != nil && u.RawQuery == "" {
		if _, hasPass := u.User.Password(); !hasPass {
			inURL = false // https://alice@host with a token file: alice is the user name
		}
	}
	if inURL {
		log.Warn("the --source URL holds a credential, which every user of this machine can read in the process list (ps) and which stays in shell history: give the URL without it and put the token in --git-token-file or $"+envGitToken, "source", git.RedactURL(source))
	}
	if strings.HasPrefix(source, "http://") && (inURL || withToken) {
		log.Warn("git credentials are sent unencrypted over plain http://: anyone on the network path can read them; use an https:// URL", "source", git.RedactURL(source))
	}
}

// webhook returns the webhook for a git source, nil for a directory or
// when no secret is configured.
func (f *sourceFlags) webhook(src *openedSource, log *slog.Logger, trigger func()) (*api.Webhook, error) {
	gs, ok := src.Source.(*git.Source)
	if !ok {
		return nil, nil
	}
	s, err := secret(f.webhookSecretFile, envWebhookSecret)
	if err != nil || s == "" {
		return nil, err
	}
	if err := api.CheckWebhookSecret([]byte(s)); err != nil {
		from := "$" + envWebhookSecret
		if f.webhookSecretFile != "" {
			from = "--webhook-secret-file " + f.webhookSecretFile
		}
		return nil, usagef("%s: %v", from, err)
	}
	return &api.Webhook{Secret: []byte(s), Trigger: func() { gs.Poke(); trigger() }, Logger: log}, nil
}

// secret reads a secret from file, else from the environment variable;
// the value is trimmed of surrounding white space.
func secret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", &exitError{Code: exitFailure, Err: fmt.Errorf("read secret file: %w", err)}
		}
		return strings.TrimSpace(string(b)), nil
	}
	return strings.TrimSpace(os.Getenv(env)), nil
}

// triggerChan is a channel the webhook signals without blocking.
func triggerChan() (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	return ch, func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// printSource writes what berth status says of a git source: where, the
// revision applied and the newest seen, a failed fetch, force-pushes.
func printSource(w io.Writer, s *source.Status) {
	if s == nil {
		return
	}
	where := s.URL
	if s.Branch != "" {
		where += " branch " + s.Branch
	}
	if s.Path != "" {
		where += " path " + s.Path
	}
	fmt.Fprintf(w, "Source:    %s %s", s.Kind, where)
	if !s.LastFetchedAt.IsZero() {
		fmt.Fprintf(w, " (fetched %s)", s.LastFetchedAt.UTC().Format("15:04:05"))
	}
	fmt.Fprintln(w)
	if s.LastAppliedRevision != "" {
		fmt.Fprintf(w, "Applied:   %s\n", s.LastAppliedRevision)
	}
	if s.LastAttemptedRevision != "" && s.LastAttemptedRevision != s.LastAppliedRevision {
		fmt.Fprintf(w, "Attempted: %s\n", s.LastAttemptedRevision)
	}
	if s.FetchError != "" {
		fmt.Fprintf(w, "Fetch failed: %s\n", s.FetchError)
	}
	for _, fp := range s.ForcePushes {
		fmt.Fprintf(w, "Force-push: %s → %s at %s\n", shortHash(fp.From), shortHash(fp.To), fp.At.UTC().Format(time.RFC3339))
	}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
