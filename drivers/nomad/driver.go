package nomad

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/hashicorp/nomad/api"
)

// Meta keys berth writes on jobs, task groups and namespaces. A job
// without MetaProject and MetaWorkspace is not berth's: berth never
// changes or stops it.
const (
	MetaProject   = "berth.project"
	MetaWorkspace = "berth.workspace"
	MetaRevision  = "berth.revision"
	MetaGPUs      = "berth.gpus"
	MetaReplica   = "berth.replica"
	MetaNode      = "berth.node"
	// MetaSpecHash is the workspace's drivers.Fingerprint; MetaJobHash the
	// hash of the job's task-visible parts as berth rendered them.
	MetaSpecHash = "berth.spec-hash"
	MetaJobHash  = "berth.job-hash"
	// MetaCreatedBy on a namespace marks one berth created; berth deletes
	// no other.
	MetaCreatedBy = "berth.created-by"
	createdBy     = "berth"
	// TaskName is the name of the one task of each group.
	TaskName = "main"
)

// Config says how to reach Nomad and how berth lays out its objects.
// Token is a secret: String never prints it and no error carries it.
type Config struct {
	// Address, Region, Token and the TLS files follow Nomad's conventions;
	// ConfigFromEnv fills them from NOMAD_ADDR, NOMAD_REGION, NOMAD_TOKEN,
	// NOMAD_CACERT, NOMAD_CLIENT_CERT and NOMAD_CLIENT_KEY.
	Address    string
	Region     string
	Token      string
	CACert     string
	ClientCert string
	ClientKey  string
	// Datacenters the jobs may run in (default: all, "*").
	Datacenters []string
	// StateNamespace and StatePath locate the reconciler's memory in
	// Nomad Variables (default "default", "berth/state/history"): a head
	// Variable at StatePath and shards under StatePath/, so StatePath
	// has at most 85 characters.
	StateNamespace string
	StatePath      string
	// LeasePath is the Variable of the replicas' leader lease (default
	// "berth/state/leader", in StateNamespace; lease.go).
	LeasePath string
	// PlacementTimeout bounds how long Apply waits to see where Nomad put
	// a started workspace (default 30s); it waits with blocking queries.
	PlacementTimeout time.Duration
	// RestartDelay, when set, replaces the delay between the in-place
	// restarts of every failed task whose workspace asks for restarts
	// (tests shorten it); zero: each spec's restart.delay.
	RestartDelay time.Duration
	// RequestTimeout bounds each request to Nomad, its answer included
	// (default DefaultRequestTimeout); a blocking query gets its wait on
	// top, and the event stream is cut only when it stays silent. A
	// request cut by it fails with a *TimeoutError (transient).
	RequestTimeout time.Duration
	// HTTPClient replaces the api package's client (tests); its requests
	// get deadlines too.
	HTTPClient *http.Client
	// Now is the driver's clock (default time.Now).
	Now func() time.Time
	// Resync is how often Observe reads the cluster whole even while
	// Watch follows its event stream (default DefaultResync; follow.go).
	Resync time.Duration
	// Use says how StartSampling samples the GPUs' utilization
	// (drivers.Alloc.Use; use.go).
	Use UseConfig
	// Logger receives what the driver's background work has to say (the
	// sampler: a node that stops answering, once); nil: nothing.
	Logger *slog.Logger
}

// ConfigFromEnv reads the NOMAD_* variables the api package reads.
// address, when not empty, overrides NOMAD_ADDR (--cluster nomad://host:port).
func ConfigFromEnv(address string) Config {
	d := api.DefaultConfig()
	c := Config{
		Address: d.Address, Region: d.Region, Token: d.SecretID,
	}
	if d.TLSConfig != nil {
		c.CACert, c.ClientCert, c.ClientKey = d.TLSConfig.CACert, d.TLSConfig.ClientCert, d.TLSConfig.ClientKey
	}
	if address != "" {
		c.Address = address
	}
	return c
}

// String describes the connection without the token.
func (c Config) String() string {
	tok := "none"
	if c.Token != "" {
		tok = "set (hidden)"
	}
	return fmt.Sprintf("nomad %s (region %q, token %s)", c.Address, c.Region, tok)
}

// GoString keeps %#v from printing the token too.
func (c Config) GoString() string { return c.String() }

var (
	_ drivers.Cluster = (*Driver)(nil)
	_ drivers.Store   = (*Driver)(nil)
)

// Driver is berth's Nomad driver: it implements drivers.Cluster
// (Observe, Apply) and drivers.Store (LoadHistory, SaveHistory). It is
// safe for concurrent use.
type Driver struct {
	cfg    Config
	client *api.Client

	mu        sync.Mutex
	nodeIDs   map[string]string // node name (and ID) -> ID, from the last observation
	lastIndex uint64
	evicted   []Eviction
	// jobHashes are the hashes of the jobs the last observation's
	// allocations run (jobHashes.of).
	jobHashes map[*api.Job]string
	hashed    int // how many jobs the last observation hashed (tests)
	// memo is the version memo RestoreVersions gave, until the first
	// full read takes what it can of it (memo.go).
	memo map[jobKey]memoVersion
	// stderr holds the stderr tails of the exits last reported, by
	// allocation ID (addStderr).
	stderr map[string]string
	// namespaces memoizes ensureNamespace within one reconcile cycle:
	// namespace name -> what it was ensured as (nsEnsured). Observe
	// clears it, so a namespace changed outside berth is checked again
	// every cycle; a register that finds the namespace gone drops it.
	namespaces map[string]nsEnsured
	// nsLocks serialises ensureNamespace per namespace, so the appliers
	// starting a project's workspaces at once read and write it once.
	nsLocks map[string]*sync.Mutex
	// jobsSeen holds the jobs (namespace, ID) the last observation listed
	// and those berth registered since; nil before any observation.
	jobsSeen map[[2]string]bool

	// cache is the cluster as the last full read left it and the event
	// stream has moved it since (follow.go); wrote is the index of
	// berth's last write of a job or allocation.
	cache *clusterCache
	wrote uint64

	// storeMu serializes LoadHistory and SaveHistory; stored is the
	// history as this driver last read or wrote it.
	storeMu sync.Mutex
	stored  storedHistory

	// use samples the GPUs' utilization (use.go).
	use *useSampler
}

// New connects a driver to Nomad (no request is made until used).
func New(cfg Config) (*Driver, error) {
	if cfg.StateNamespace == "" {
		cfg.StateNamespace = "default"
	}
	if cfg.StatePath == "" {
		cfg.StatePath = "berth/state/history"
	}
	if cfg.LeasePath == "" {
		cfg.LeasePath = "berth/state/leader"
	}
	if cfg.PlacementTimeout == 0 {
		cfg.PlacementTimeout = 30 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if len(cfg.Datacenters) == 0 {
		cfg.Datacenters = []string{"*"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	ac := api.DefaultConfig()
	ac.Address = cfg.Address
	ac.Region = cfg.Region
	ac.SecretID = cfg.Token
	ac.Namespace = ""
	if ac.TLSConfig == nil {
		ac.TLSConfig = &api.TLSConfig{}
	}
	ac.TLSConfig.CACert, ac.TLSConfig.ClientCert, ac.TLSConfig.ClientKey = cfg.CACert, cfg.ClientCert, cfg.ClientKey
	if cfg.HTTPClient != nil {
		hc := *cfg.HTTPClient
		ac.HttpClient = &hc
	} else {
		// The api package's default keeps GOMAXPROCS+1 idle connections per
		// host; the loop applies up to 32 actions at once, so most would
		// open a new connection for each request. Nomad refuses a client
		// IP's 101st concurrent connection (limits.http_max_conns_per_client,
		// 100 by default) with 429 for everyone on that address, so berth
		// never holds more than maxConns: the 32 appliers, the event
		// stream and a few reads, with room left for the other clients
		// on berth's host.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxConnsPerHost = maxConns
		tr.MaxIdleConnsPerHost = maxConns
		tr.IdleConnTimeout = 30 * time.Second
		tr.ForceAttemptHTTP2 = false // as the api package: HTTP/1.1
		// unix://PATH, the Task API socket a task with a workload identity
		// reaches Nomad through (${NOMAD_SECRETS_DIR}/api.sock): the api
		// package dials the socket only with a client of its own, and
		// sends requests to http://127.0.0.1 for any client, so this
		// transport must dial the socket itself.
		if sock, ok := strings.CutPrefix(cfg.Address, "unix://"); ok {
			tr.Proxy = nil
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialUnix(ctx, sock)
			}
		}
		ac.HttpClient = &http.Client{Transport: tr}
		if err := api.ConfigureTLS(ac.HttpClient, ac.TLSConfig); err != nil {
			return nil, fmt.Errorf("nomad: TLS for %s: %w", cfg.Address, err)
		}
	}
	next := ac.HttpClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	d := &Driver{cfg: cfg, nodeIDs: map[string]string{}, namespaces: map[string]nsEnsured{}, nsLocks: map[string]*sync.Mutex{}, cache: newClusterCache(),
		use: newUseSampler(cfg.Use, cfg.Logger)}
	ac.HttpClient.Transport = writeIndexes{next: deadlines{next: next, timeout: cfg.RequestTimeout}, note: d.noteWrite}
	client, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("nomad: client for %s: %w", cfg.Address, err)
	}
	d.client = client
	return d, nil
}

// dialUnix connects to the socket at path. A socket's address holds at
// most 107 bytes (sun_path), and a task's secrets directory under a deep
// Nomad data directory is longer (the kit's raw_exec tasks: about 120):
// then it connects through the directory, opened, as
// /proc/self/fd/N/NAME (Linux).
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) < 100 {
		return d.DialContext(ctx, "unix", path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	conn, err := d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
	if err != nil {
		return nil, fmt.Errorf("dial unix %s: %w", path, err)
	}
	return conn, nil
}

// maxConns bounds the connections one driver holds open to Nomad.
const maxConns = 40

// Close stops the sampler (StartSampling), waiting for it, and releases
// the driver's idle connections to Nomad. A driver that is dropped
// without Close keeps them open until they time out, and they count
// against Nomad's per-IP limit meanwhile.
func (d *Driver) Close() error {
	d.use.stop()
	d.client.Close()
	return nil
}

// Client returns the api client the driver uses (berth doctor reads the
// scheduler configuration through it).
func (d *Driver) Client() *api.Client { return d.client }

func (d *Driver) q(ctx context.Context, ns string) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: ns}).WithContext(ctx)
}

// w returns write options. A write's answer is small (or echoes what
// was written): it comes without gzip (identity).
func (d *Driver) w(ctx context.Context, ns string) *api.WriteOptions {
	return (&api.WriteOptions{Namespace: ns, Headers: identity}).WithContext(ctx)
}

// identity asks Nomad for an answer without gzip: the api package adds
// "Accept-Encoding: gzip" after it, and Nomad's gzip handler (which
// compresses every answer, however small) reads the first value only.
// A small answer (a write's, one job, evaluation, allocation or
// namespace, one job's allocations) costs berth more CPU to unzip (a
// fresh decompressor of some 40 KB each) than it saves on the wire.
// Should anything in between answer with gzip anyway, the api package
// still unzips it. Lists of the whole cluster (Observe) keep gzip.
var identity = map[string]string{"Accept-Encoding": "identity"}

// sleep waits for dur or until ctx ends.
func sleep(ctx context.Context, dur time.Duration) error {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
