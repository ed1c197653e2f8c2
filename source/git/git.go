// Package git is the git source: a branch of a repository, cloned shallow
// into a private directory on disk and fetched (FetchEvery, or at once
// when poked by the webhook); force-pushes reported; OpenPGP-signed
// commits optionally required; only the spec files under Path are read,
// each blob's size checked before it is.
package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing/fstest"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"golang.org/x/crypto/ssh"

	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/source"
)

// Auth is how the git source authenticates. It holds secrets: nothing
// in it is ever logged, reported in the status or put in an error.
type Auth struct {
	// Username and Password (or a token as the password) for https. An
	// empty Username with a Password uses "git".
	Username, Password string
	// SSHKey is a PEM private key for ssh URLs, SSHKeyPassphrase its
	// passphrase (may be empty). Without a key, ssh uses the ssh agent.
	SSHKey           []byte
	SSHKeyPassphrase string
	// KnownHosts is the known_hosts file host keys are checked against;
	// empty uses $SSH_KNOWN_HOSTS, ~/.ssh/known_hosts and
	// /etc/ssh/ssh_known_hosts.
	KnownHosts string
	// InsecureIgnoreHostKey turns host key checking off (a warning is
	// logged on every fetch).
	InsecureIgnoreHostKey bool
}

// Source reads specs from a branch of a git repository: it clones it
// once, shallow (the branch head only), into a private directory on disk,
// and fetches on every Read. What the repository holds costs disk, not
// memory: objects live on disk; of a commit, only the spec files under
// Path are read, and a blob's size is read from its header before its
// content, so one over Limits is refused without being read. (A clone or
// fetch holds the largest object it brings for a moment, as go-git v5's
// pack indexer reads each object whole once, and gives it back after.)
// The revision ID is the commit's hash, abbreviated to 12 characters. It
// is safe for concurrent use; Close removes the directory.
type Source struct {
	// URL is https://…, ssh://…, user@host:path or file://….
	URL string
	// Branch; empty: the remote's HEAD.
	Branch string
	// Path is the directory of the repository that holds the specs ("" or
	// "." for the root).
	Path string
	Auth Auth
	// VerifyKeys is an armored OpenPGP key ring; when set, only commits
	// signed by one of its keys are applied (an unsigned or badly signed
	// commit is refused like an invalid one). go-git v5 verifies OpenPGP
	// signatures only: SSH- and X.509-signed commits are refused.
	VerifyKeys string
	Logger     *slog.Logger
	// Now is the clock of the status times (default time.Now).
	Now func() time.Time
	// FetchEvery, when positive, is the least time between fetches: a
	// Read sooner than that after the last fetch serves what it has (the
	// loop cycles every second while workspaces settle), unless Poke was
	// called since. Zero fetches on every Read.
	FetchEvery time.Duration
	// Timeout bounds each clone or fetch (default DefaultTimeout): a
	// git server that accepts and never answers is cut, and the Read
	// fails with a *Error that says so (the last good revision stays
	// in force).
	Timeout time.Duration
	// Limits bound the spec files read from a commit, as the loader's
	// (zero fields: load's defaults): a file over the per-file limit,
	// or the files past the per-tree limit, are never read and make the
	// revision invalid, named in its problems.
	Limits load.Limits
	// Dir is the directory the clone is kept in; empty: a new private
	// directory under os.TempDir. Close removes it.
	Dir string

	read      sync.Mutex // one Read at a time; guards repo, dir, head, rev, lastFetch
	dir       string     // the clone's directory, while repo is set
	store     *filesystem.Storage
	repo      *gogit.Repository
	head      plumbing.Hash
	rev       source.Revision
	lastFetch time.Time
	poked     atomic.Bool

	mu     sync.Mutex // guards what the status reads, never held over I/O
	branch string
	status source.Status
	hashes map[string]string // short ID -> full hash of heads seen
}

// DefaultTimeout is Source.Timeout's default: a clone of a large
// spec repository takes seconds; one that takes this long is stuck.
const DefaultTimeout = 2 * time.Minute

// source.Status returns the source's status; the caller owns the copy.
func (s *Source) SourceStatus() source.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Kind, st.URL, st.Branch, st.Path = "git", RedactURL(s.URL), s.branch, s.Path
	if st.Branch == "" {
		st.Branch = s.Branch
	}
	st.ForcePushes = append([]source.ForcePush(nil), s.status.ForcePushes...)
	return st
}

// Poke makes the next Read fetch whatever FetchEvery says (the webhook
// calls it).
func (s *Source) Poke() { s.poked.Store(true) }

// FullRevision names a short ID as BRANCH@sha1:HASH when the source saw it.
func (s *Source) FullRevision(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hashes[id]; ok {
		return s.branch + "@sha1:" + h
	}
	return id
}

// Error is a failed fetch or clone, with every secret taken out.
type Error struct {
	Op  string
	URL string
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("git %s %s: %s", e.Op, e.URL, e.Msg) }

// Read fetches the branch and returns its head's files. A failed fetch is
// a *Error (the loop backs off and leaves the cluster as it is); a
// commit that fails signature verification, or lacks Path, is a Revision
// with Problems.
func (s *Source) Read(ctx context.Context) (source.Revision, error) {
	s.read.Lock()
	defer s.read.Unlock()
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if s.Auth.InsecureIgnoreHostKey && isSSHURL(s.URL) {
		log.Warn("git host key checking is OFF (--git-insecure-skip-host-key-check): anyone between berth and " + RedactURL(s.URL) + " can serve it specs")
	}
	// 1. Clone once, fetch after (not more often than FetchEvery unless
	// poked).
	poked := s.poked.Swap(false)
	if s.repo != nil && s.rev.FS != nil && s.FetchEvery > 0 && !poked && now().Sub(s.lastFetch) < s.FetchEvery {
		return s.rev, nil
	}
	s.lastFetch = now()
	if err := s.fetch(ctx); err != nil {
		s.mu.Lock()
		s.status.FetchError = err.Error()
		s.mu.Unlock()
		return source.Revision{}, err
	}
	s.mu.Lock()
	s.status.FetchError = ""
	s.status.LastFetchedAt = now()
	branch := s.branch
	s.mu.Unlock()
	// 2. The branch head, and whether it moved by force.
	ref, err := s.repo.Reference(plumbing.NewRemoteReferenceName("origin", branch), true)
	if err != nil {
		return source.Revision{}, s.fail("read", fmt.Sprintf("branch %q: %v", branch, err))
	}
	head := ref.Hash()
	if head == s.head && s.rev.FS != nil {
		return s.rev, nil
	}
	commit, err := s.repo.CommitObject(head)
	if err != nil {
		return source.Revision{}, s.fail("read", fmt.Sprintf("commit %s: %v", head, err))
	}
	if !s.head.IsZero() {
		if _, err := s.repo.CommitObject(s.head); err == nil {
			if !reaches(s.repo, commit, s.head) {
				fp := source.ForcePush{At: now(), From: s.head.String(), To: head.String()}
				s.mu.Lock()
				s.status.ForcePushes = append(s.status.ForcePushes, fp)
				if n := len(s.status.ForcePushes); n > maxForcePushes {
					s.status.ForcePushes = s.status.ForcePushes[n-maxForcePushes:]
				}
				s.mu.Unlock()
				log.Warn("force-push on "+branch+": "+short(s.head)+" is not an ancestor of "+short(head), "from", fp.From, "to", fp.To)
			}
		}
	}
	s.head = head
	s.mu.Lock()
	if s.hashes == nil {
		s.hashes = map[string]string{}
	}
	s.hashes[short(head)] = head.String()
	s.status.LastAttemptedRevision = branch + "@sha1:" + head.String()
	s.mu.Unlock()
	rev := source.Revision{ID: short(head), Root: "."}
	// 3. Signature.
	if s.VerifyKeys != "" {
		if p := verifyCommit(commit, s.VerifyKeys); p != "" {
			rev.Problems = []string{p}
			rev.FS = fstest.MapFS{}
			s.rev = rev
			return rev, nil
		}
	}
	// 4. The files under Path.
	fsys, problems, err := treeFS(s.repo.Storer, commit, s.Path, s.Limits)
	if err != nil {
		problems = []string{err.Error()}
		fsys = fstest.MapFS{}
	}
	rev.Problems = problems
	rev.FS = fsys
	s.rev = rev
	return rev, nil
}

// reaches reports whether target is from or one of its ancestors that the
// repository holds. The clone is shallow, so the walk skips parents it
// does not have: a fetch brings every commit between the old head and the
// new, so an old head not found is not an ancestor (a force-push).
func reaches(repo *gogit.Repository, from *object.Commit, target plumbing.Hash) bool {
	seen := map[plumbing.Hash]bool{}
	queue := []*object.Commit{from}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c.Hash == target {
			return true
		}
		for _, h := range c.ParentHashes {
			if seen[h] {
				continue
			}
			seen[h] = true
			if p, err := repo.CommitObject(h); err == nil {
				queue = append(queue, p)
			}
		}
	}
	return false
}

// gitLargeObject is the size above which an object is never loaded into
// memory whole: reading it streams from the pack on disk.
const gitLargeObject = 1 << 20

// gitObjectCache bounds the cache of objects read from the packs.
const gitObjectCache = 8 * cache.MiByte

// storage makes the on-disk storage of a new clone: in s.Dir, or in a
// new private directory.
func (s *Source) storage() (string, *filesystem.Storage, error) {
	dir := s.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "berth-git-")
		if err != nil {
			return "", nil, fmt.Errorf("a directory for the clone: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("a directory for the clone: %w", err)
	} else if err := s.removeDir(dir); err != nil {
		// What a berth killed before its Close left there.
		return "", nil, fmt.Errorf("empty the directory for the clone: %w", err)
	}
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(gitObjectCache),
		filesystem.Options{ExclusiveAccess: true, LargeObjectThreshold: gitLargeObject})
	return dir, st, nil
}

// removeDir removes a clone's directory: all of it when berth made it,
// its contents when it is s.Dir.
func (s *Source) removeDir(dir string) error {
	if dir == "" {
		return nil
	}
	if dir != s.Dir {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// Close removes the clone from disk; a later Read clones again.
func (s *Source) Close() error {
	s.read.Lock()
	defer s.read.Unlock()
	if s.repo == nil {
		return nil
	}
	s.store.Close()
	err := s.removeDir(s.dir)
	s.repo, s.store, s.dir, s.head, s.rev = nil, nil, "", plumbing.ZeroHash, source.Revision{}
	return err
}

// releaseMemory hands back to the system what a clone or fetch that
// brought objects used on the way: go-git's pack indexer reads each object
// of a pack whole, once, into a pooled buffer that would otherwise be kept
// (a pool outlives one collection, hence two).
func releaseMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// fetch clones the repository the first time and fetches the branch
// after; callers hold s.read.
func (s *Source) fetch(ctx context.Context) (err error) {
	auth, err := s.authMethod()
	if err != nil {
		return s.fail("auth", err.Error())
	}
	limit := s.Timeout
	if limit <= 0 {
		limit = DefaultTimeout
	}
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	defer func() {
		// Say what was cut, not only "context deadline exceeded".
		var ge *Error
		if errors.As(err, &ge) && ctx.Err() != nil && outer.Err() == nil {
			ge.Msg = fmt.Sprintf("no answer from the git server within %s: cut (git timeout): %s", limit, ge.Msg)
		}
	}()
	if s.repo != nil && packCount(s.dir) >= maxGitPacks {
		// Afresh: the old clone goes with every object fetched since.
		s.store.Close()
		if err := s.removeDir(s.dir); err != nil {
			return s.fail("clone", fmt.Sprintf("remove the old clone: %v", err))
		}
		s.repo, s.store, s.dir = nil, nil, ""
	}
	cloned := false
	if s.repo == nil {
		cloned = true
		// Shallow: the history before the branch head (and every blob in
		// it) is never fetched; later fetches bring only new commits.
		opts := &gogit.CloneOptions{URL: s.URL, Auth: auth, SingleBranch: true, NoCheckout: true, Tags: gogit.NoTags, Depth: 1}
		if s.Branch != "" {
			opts.ReferenceName = plumbing.NewBranchReferenceName(s.Branch)
		}
		// On disk, not in memory: a pack is written to a file as it
		// arrives and only hashed on the way, so a large blob costs disk,
		// not memory.
		dir, st, err := s.storage()
		if err != nil {
			return s.fail("clone", err.Error())
		}
		repo, err := gogit.CloneContext(ctx, st, nil, opts)
		if err == nil {
			var head *plumbing.Reference
			if head, err = repo.Head(); err != nil {
				err = fmt.Errorf("the remote has no HEAD branch: %w", err)
			} else {
				s.mu.Lock()
				s.branch = head.Name().Short()
				s.mu.Unlock()
			}
		}
		if err != nil {
			st.Close()
			s.removeDir(dir)
			if s.Branch != "" && (errors.Is(err, plumbing.ErrReferenceNotFound) || strings.Contains(err.Error(), "couldn't find remote ref")) {
				return s.fail("clone", fmt.Sprintf("branch %q not found on the remote", s.Branch))
			}
			return s.fail("clone", err.Error())
		}
		s.repo, s.dir, s.store = repo, dir, st
		// Fetch at once too, so the remote-tracking ref is there.
	}
	s.mu.Lock()
	branch := s.branch
	s.mu.Unlock()
	spec := config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", branch, branch))
	err = s.repo.FetchContext(ctx, &gogit.FetchOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}, Auth: auth, Force: true, Tags: gogit.NoTags})
	switch {
	case err == nil, errors.Is(err, gogit.NoErrAlreadyUpToDate):
		if err == nil || cloned {
			releaseMemory()
		}
		return nil
	case errors.Is(err, gogit.NoMatchingRefSpecError{}) || strings.Contains(err.Error(), "couldn't find remote ref"):
		return s.fail("fetch", fmt.Sprintf("branch %q not found on the remote", branch))
	}
	return s.fail("fetch", err.Error())
}

// maxGitPacks bounds the packs a clone gathers. Each fetch that brings
// commits writes one, and together they keep every object fetched since
// the clone, a large blob that has left HEAD too; past this many the
// next fetch clones afresh (shallow) and removes the old clone, so the
// disk a long-running berth uses stays about one clone and its recent
// fetches. The force-push check then has no old head to look for and is
// skipped once.
const maxGitPacks = 32

// packCount is how many packs the clone in dir holds.
func packCount(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	return len(m)
}

// fail makes a Error with every secret the source knows taken out.
func (s *Source) fail(op, msg string) error {
	return &Error{Op: op, URL: RedactURL(s.URL), Msg: s.redact(msg)}
}

// redact replaces every secret of the source in msg by "***": the
// passwords and passphrases given, and every credential the URL holds
// (its user info's password, an http(s) or git:// user name that is a
// token, query values), raw and escaped.
func (s *Source) redact(msg string) string {
	secrets := append([]string{s.Auth.Password, s.Auth.SSHKeyPassphrase}, urlSecrets(s.URL)...)
	msg = strings.ReplaceAll(msg, s.URL, RedactURL(s.URL))
	for _, sec := range secrets {
		if len(sec) < 4 {
			continue
		}
		// As given, and as a URL's query or user info escapes it.
		for _, form := range []string{sec, url.QueryEscape(sec), url.User(sec).String()} {
			msg = strings.ReplaceAll(msg, form, "***")
		}
	}
	return msg
}

// urlSecrets returns the credentials in a URL: the user info's password,
// the user name where it is one (see RedactURL), and query values.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || !strings.Contains(raw, "://") {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		} else if userIsSecret(u.Scheme) {
			out = append(out, u.User.Username())
		}
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	return out
}

// userIsSecret reports whether a URL scheme's user name, given without a
// password, is a credential: forges take a token as the user name of an
// https URL (https://TOKEN@host/x.git), and git:// has no login, so a
// user name there is nothing else. An ssh user name is a login, not a
// secret.
func userIsSecret(scheme string) bool {
	return scheme != "ssh" && scheme != "git+ssh" && scheme != "ssh+git"
}

// HasURLCredential reports whether a git URL carries a credential
// (RedactURL would hide something).
func HasURLCredential(raw string) bool {
	return RedactURL(raw) != raw
}

var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

func isSSHURL(u string) bool {
	return strings.HasPrefix(u, "ssh://") || (!strings.Contains(u, "://") && scpLike.MatchString(u))
}

// IsURL reports whether source names a remote to clone rather than a
// local directory.
func IsURL(source string) bool {
	for _, p := range []string{"https://", "http://", "ssh://", "file://", "git://"} {
		if strings.HasPrefix(source, p) {
			return true
		}
	}
	return isSSHURL(source)
}

// RedactURL returns a URL that is safe to print: every credential in it
// is replaced by "***" -- the password of its user info
// (https://bot:***@host), a user name that is a token
// (https://***@host/x.git, git://***@host; an ssh user name is a login
// and stays), and the values of its query (?access_token=***). An
// scp-like ssh address (git@host:org/x.git) has no credential and is
// returned as it is; an unparsable URL as "(unparsable URL)".
func RedactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw // scp-like ssh or a path: no password there
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	var userinfo string
	if u.User != nil {
		_, hasPass := u.User.Password()
		switch {
		case hasPass:
			userinfo = url.User(u.User.Username()).String() + ":***@"
		case userIsSecret(u.Scheme):
			userinfo = "***@"
		default:
			userinfo = u.User.String() + "@"
		}
	}
	query := ""
	if u.RawQuery != "" {
		q := u.Query()
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(q)) {
			for range q[k] {
				parts = append(parts, url.QueryEscape(k)+"=***")
			}
		}
		query = "?" + strings.Join(parts, "&")
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.Replace(u.String(), u.Scheme+"://", u.Scheme+"://"+userinfo, 1) + query
}

func (s *Source) authMethod() (transport.AuthMethod, error) {
	a := s.Auth
	if isSSHURL(s.URL) {
		user := "git"
		if strings.HasPrefix(s.URL, "ssh://") {
			if u, err := url.Parse(s.URL); err == nil && u.User != nil && u.User.Username() != "" {
				user = u.User.Username()
			}
		} else if at := strings.Index(s.URL, "@"); at > 0 {
			user = s.URL[:at]
		}
		var cb ssh.HostKeyCallback
		if a.InsecureIgnoreHostKey {
			cb = ssh.InsecureIgnoreHostKey()
		} else {
			var files []string
			if a.KnownHosts != "" {
				files = []string{a.KnownHosts}
			}
			k, err := gitssh.NewKnownHostsCallback(files...)
			if err != nil {
				return nil, fmt.Errorf("known_hosts: %v (give one with --git-known-hosts)", err)
			}
			cb = k
		}
		if len(a.SSHKey) == 0 {
			agent, err := gitssh.NewSSHAgentAuth(user)
			if err != nil {
				return nil, fmt.Errorf("no ssh key given (--git-ssh-key) and no ssh agent: %v", err)
			}
			agent.HostKeyCallback = cb
			return agent, nil
		}
		keys, err := gitssh.NewPublicKeys(user, a.SSHKey, a.SSHKeyPassphrase)
		if err != nil {
			return nil, errors.New("ssh key: cannot read it (wrong passphrase or not a PEM private key)")
		}
		keys.HostKeyCallback = cb
		return keys, nil
	}
	if a.Password != "" {
		user := a.Username
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: a.Password}, nil
	}
	return nil, nil
}

// verifyCommit returns why commit's signature is not good for keyring, or
// "" when it is.
func verifyCommit(c *object.Commit, keyring string) string {
	sig := c.PGPSignature
	switch {
	case sig == "":
		return fmt.Sprintf("commit %s is not signed; --verify-keys applies only signed commits", short(c.Hash))
	case strings.Contains(sig, "BEGIN SSH SIGNATURE"):
		return fmt.Sprintf("commit %s has an SSH signature; berth (go-git v5) verifies OpenPGP signatures only", short(c.Hash))
	}
	e, err := c.Verify(keyring)
	if err != nil {
		return fmt.Sprintf("commit %s: signature not verified by --verify-keys: %v", short(c.Hash), err)
	}
	_ = e
	return ""
}

// noDirError: the commit has no such directory.
type noDirError string

func (e noDirError) Error() string { return string(e) }

// treeFS copies the files of commit under dir that the loader reads
// (*.yaml, *.yml, *.cue, .berthignore) into memory, within limits; no
// other blob is read. A symbolic link becomes a link in the tree (the
// loader follows it only inside the tree). Each blob's size is read from
// its header first: a file over the per-file limit, and the files past
// the per-tree limit, are left out unread and named in the returned
// problems, in the loader's words.
func treeFS(objects storer.EncodedObjectStorer, c *object.Commit, dir string, limits load.Limits) (fstest.MapFS, []string, error) {
	limits = limits.WithDefaults()
	tree, err := c.Tree()
	if err != nil {
		return nil, nil, fmt.Errorf("commit %s: %w", short(c.Hash), err)
	}
	dir = strings.Trim(path.Clean("/"+dir), "/")
	if dir != "" {
		tree, err = tree.Tree(dir)
		if err != nil {
			return nil, nil, noDirError(fmt.Sprintf("commit %s has no directory %q (--path)", short(c.Hash), dir))
		}
	}
	fsys := fstest.MapFS{}
	var problems []string
	var total int64
	full := false
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, e, err := walker.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("commit %s: read files: %w", short(c.Hash), err)
		}
		if !e.Mode.IsFile() || hiddenPath(name) && path.Base(name) != load.IgnoreFile {
			continue
		}
		link := e.Mode == filemode.Symlink
		if !link && !loaderReads(name) {
			continue
		}
		size, err := blobSize(objects, e.Hash)
		if err != nil {
			return nil, nil, fmt.Errorf("commit %s: %s: %w", short(c.Hash), name, err)
		}
		where := path.Join(dir, name)
		if size > limits.FileBytes {
			problems = append(problems, where+": not read: "+load.FileTooLarge(size, limits.FileBytes))
			continue
		}
		if full {
			continue
		}
		if total += size; total > limits.TreeBytes {
			full = true
			problems = append(problems, where+": not read, nor any file after it: "+load.TreeTooLarge(limits.TreeBytes))
			continue
		}
		b, err := readBlob(objects, e.Hash, limits.FileBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("commit %s: %s: %w", short(c.Hash), name, err)
		}
		mode := fs.FileMode(0o644)
		if link {
			mode = fs.ModeSymlink | 0o777
		}
		fsys[name] = &fstest.MapFile{Data: b, Mode: mode}
	}
	return fsys, problems, nil
}

// blobSize returns the size of blob h without reading its content where
// the storage can (on disk, from the pack's object header).
func blobSize(objects storer.EncodedObjectStorer, h plumbing.Hash) (int64, error) {
	if sz, ok := objects.(interface {
		EncodedObjectSize(plumbing.Hash) (int64, error)
	}); ok {
		return sz.EncodedObjectSize(h)
	}
	o, err := objects.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return 0, err
	}
	return o.Size(), nil
}

// readBlob reads blob h, at most limit bytes of it.
func readBlob(objects storer.EncodedObjectStorer, h plumbing.Hash, limit int64) ([]byte, error) {
	o, err := objects.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errors.New(load.FileTooLarge(int64(len(b)), limit))
	}
	return b, nil
}

// loaderReads reports whether the spec loader reads a file of this name.
func loaderReads(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".cue":
		return true
	}
	return path.Base(name) == load.IgnoreFile
}

// hiddenPath reports whether a slash path is or is in a hidden entry
// (.github, .gitignore): left out, as DirSource leaves them out.
func hiddenPath(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

func short(h plumbing.Hash) string { return h.String()[:12] }

// RevisionFS returns the files of dir, a directory inside a git
// working tree, as they are at ref (a branch, tag, commit or an
// expression such as origin/main or HEAD~1), and the commit's short hash.
// Hidden entries are left out, as DirSource leaves them out, and so are
// files over limits (unread).
func RevisionFS(dir, ref string, limits load.Limits) (fs.FS, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	repo, err := gogit.PlainOpenWithOptions(abs, &gogit.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, "", fmt.Errorf("open git repository at %s: %w", dir, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, "", fmt.Errorf("git repository at %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return nil, "", err
	}
	if a, err := filepath.EvalSymlinks(abs); err == nil {
		abs = a
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, "", fmt.Errorf("%s is not inside the git working tree %s", dir, root)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return nil, "", fmt.Errorf("git revision %q: %w", ref, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, "", fmt.Errorf("git revision %q: %w", ref, err)
	}
	fsys, _, err := treeFS(repo.Storer, c, filepath.ToSlash(rel), limits) // a file too large is left out: plan's base is a comparison
	var noDir noDirError
	if errors.As(err, &noDir) {
		return fstest.MapFS{}, short(c.Hash), nil // the specs are new since ref
	}
	if err != nil {
		return nil, "", err
	}
	return fsys, short(c.Hash), nil
}

// InWorkTree reports whether dir is inside a git working tree.
func InWorkTree(dir string) bool {
	_, err := gogit.PlainOpenWithOptions(dir, &gogit.PlainOpenOptions{DetectDotGit: true})
	return err == nil
}

// maxForcePushes bounds the force-pushes kept in the status.
const maxForcePushes = 10
