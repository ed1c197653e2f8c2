package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/leader"
	"github.com/berth-dev/berth/load"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source/git"
	"github.com/berth-dev/berth/source/watch"
	"github.com/berth-dev/berth/view"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// defaultListen is where the loop serves its status.
const defaultListen = "127.0.0.1:4680"

func newReconcileCmd() *cobra.Command {
	var o reconcileOptions
	cmd := &cobra.Command{
		Use:   "reconcile --source DIR|GIT-URL --cluster CLUSTER",
		Short: "Keep a cluster matching the specs, continuously",
		Long: `reconcile runs berth's loop: it reads the specs under --source, validates
them, observes the cluster, decides who runs where, and applies the
difference; again whenever a file changes and every --interval. An invalid
revision is never applied: the last good one stays in force.

--source is a directory (watched for changes; when it is a symbolic link,
as git-sync's --link is, a swap of the link applies at once) or a git URL (https://…,
ssh://…, git@host:org/repo.git, file://…), cloned shallow into a private
directory under $TMPDIR (removed when berth stops) and fetched every
--interval, or at once on a signed POST to
/api/v1/hooks/git (--webhook-secret-file). A workspace removed from the
specs is stopped, and purged only after --prune-delay; a revision that
would stop or remove many workspaces at once is refused unless allowed.

Each workspace transition is logged as one line. The status is served on
--listen: /api/v1/status, /api/v1/workspaces/PROJECT/NAME, /healthz,
/metrics, and a live dashboard at / (its feed: the WebSocket
/api/v1/events). Ctrl-C stops it.

berth never waits forever: each request to Nomad is cut after
--nomad-timeout, each git clone or fetch after --git-timeout, and a whole
cycle after --cycle-timeout; the log names what was cut, and the next
cycle observes again (a spec change made meanwhile is applied then).
/healthz answers {"status":"ok",…} with the age of the last successful
cycle, and 503 {"status":"stale",…} once it is older than
--health-max-age: point Nomad's (or any) health check at it to restart a
berth that is stuck or cannot reach its cluster.

Replicas: several berths may drive one Nomad cluster (for availability).
They elect a leader through a lease in a Nomad Variable
(berth/state/leader), renewed with check-and-set every 0.3 --lease-ttl; only
the leader applies and saves. The others follow: they serve the status
read-only, name the leader in /api/v1/status ("leader") and take over
within --lease-ttl when it dies (at once when it stops cleanly). A
restarted or newly elected berth continues from what the last leader
saved in Nomad: transitions, preemption records, prune delays.

--listen is loopback by default, and without a token berth answers only
requests addressed to localhost, 127.x.x.x, [::1] or the --listen host
(403 for any other Host: a guard against DNS rebinding). On any other
address berth requires a bearer token, read from --ui-token-file, for
everything but the dashboard's static files and /healthz: the API, the
event feed and /metrics (they all show the same cluster). Open the
dashboard and paste the token, or go to http://HOST:PORT/#token=TOKEN (the
fragment never reaches a server or its logs); berth status and berth explain send it with
--token-file FILE or $BERTH_TOKEN.

The webhook needs no bearer token: it proves itself with the secret
(at least 32 bytes), as a signature of the body (X-Hub-Signature-256,
at most 1 MiB) or the secret itself (X-Berth-Webhook-Token,
X-Gitlab-Token). Only push events start a fetch.

Notifications: the specs' Notification documents route workspace events
(preempted, moved, failed, resumed, overdue, time-limit, idle) and
revision events (applied, refused) to webhooks (JSON signed with
HMAC-SHA256 in X-Berth-Signature) and Slack; their URLs and keys are read
from the environment or files of this process, named in the spec. They
are sent in the background: a receiver that is down or slow delays no
cycle (retried --notify-attempts times with backoff; past --notify-queue
they are dropped and counted). --commit-status github|gitlab posts each
revision's commit status (success in force, failure refused, with the
errors), with the token from $GITHUB_TOKEN or $GITLAB_TOKEN.

On Nomad, berth reads each running workspace's GPU utilization, as the
NVIDIA device plugin reports it, for berth status, explain, the dashboard
and /metrics: each node that holds berth's running GPUs is read once per
--gpu-use-interval (GET /v1/client/stats, one request per node, never one
per workspace; the token needs node:read), at most --gpu-use-rate reads a
second, apart from the cycles, which show the last reading. MIG instances
report none; a node that does not answer is logged once and shows none
until it does. --gpu-use=false turns it off.

Give credentials in files or the environment, not in the --source URL
(berth warns: ps shows it to every user); every credential in the URL is
shown as *** in logs and the status.

` + limitsHelp + `

` + clusterHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.healthMaxAgeSet = cmd.Flags().Changed("health-max-age")
			return runReconcile(cmd, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.source, "source", "", "directory or git URL of the specs to reconcile")
	fl.StringVar(&o.cluster, "cluster", "", "the cluster to drive (see below)")
	fl.Float64Var(&o.simSpeed, "sim-speed", 1, "how fast a simulated cluster's clock runs (60: a second is a minute)")
	fl.StringVar(&o.listen, "listen", defaultListen, "address of the status API")
	fl.DurationVar(&o.interval, "interval", time.Minute, "longest time between cycles (and between git fetches)")
	fl.DurationVar(&o.nomadTimeout, "nomad-timeout", nomad.DefaultRequestTimeout, "longest berth waits for Nomad to answer one request (a blocking query: its wait on top) before it cuts it and retries")
	fl.DurationVar(&o.cycleTimeout, "cycle-timeout", reconcile.DefaultCycleTimeout, "longest one reconcile cycle may run before it is cut (what it applied is kept)")
	fl.DurationVar(&o.healthMaxAge, "health-max-age", reconcile.DefaultHealthMaxAge, "/healthz answers 503 once the last successful cycle is older than this; when not given, twice --interval if that is longer")
	fl.BoolVar(&o.gpuUse, "gpu-use", true, "read each running workspace's GPU utilization from Nomad (one request per node that holds its GPUs, never one per workspace) for the status, the dashboard and /metrics")
	fl.DurationVar(&o.gpuUseInterval, "gpu-use-interval", nomad.DefaultUseInterval, "how often each node's GPU utilization is read (--gpu-use)")
	fl.Float64Var(&o.gpuUseRate, "gpu-use-rate", nomad.DefaultUseRate, "most GPU utilization reads a second, spread evenly (--gpu-use): with more nodes than interval × rate, each is read every nodes/rate")
	fl.DurationVar(&o.leaseTTL, "lease-ttl", leader.DefaultLeaseTTL, "time to live of the leader lease among replicas (Nomad); a dead leader is replaced within it; 0: no election (only one berth may run)")
	o.sf.add(fl)
	o.prune.add(fl)
	o.limits.add(fl)
	o.notify.add(fl)
	fl.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fl.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&o.uiToken, "ui-token-file", "", "file holding the bearer token the API and dashboard require (required when --listen is not loopback)")
	fl.StringVar(&o.addrFile, "addr-file", "", "write the status API's URL to this file once listening")
	fl.MarkHidden("addr-file")
	fl.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run, until it stops, to this file (go tool pprof)")
	fl.MarkHidden("cpuprofile")
	return cmd
}

// reconcileOptions are berth reconcile's flags.
type reconcileOptions struct {
	loopFlags
	sf                        sourceFlags
	listen, addrFile, uiToken string
	interval, leaseTTL        time.Duration
	// Deadlines: of each request to Nomad, of a cycle, and the age of
	// the last successful cycle past which /healthz fails.
	nomadTimeout, cycleTimeout, healthMaxAge time.Duration
	// healthMaxAgeSet: --health-max-age was given; else it grows with
	// --interval.
	healthMaxAgeSet bool
	// cpuProfile: --cpuprofile, the file the run's CPU profile goes to.
	cpuProfile string
	notify     notifyFlags
	// GPU utilization: --gpu-use, --gpu-use-interval, --gpu-use-rate.
	gpuUse         bool
	gpuUseInterval time.Duration
	gpuUseRate     float64
}

// runReconcile is berth reconcile's body: check the command line, open
// the cluster and the specs, start the election, serve the status, run
// the loop until Ctrl-C or SIGTERM, then stop in order. The steps' side
// effects (log lines, files, connections) come in this order, which
// tests and users read.
func runReconcile(cmd *cobra.Command, o reconcileOptions) error {
	// 1. The command line, checked before anything is opened.
	if err := o.check(); err != nil {
		return err
	}
	limits, err := o.limits.limits()
	if err != nil {
		return err
	}
	token, err := readUIToken(o.uiToken, o.listen)
	if err != nil {
		return err
	}
	log, err := newLogger(cmd.ErrOrStderr(), o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}

	// 2. The cluster, then the specs and the webhook that announces them.
	c, err := openCluster(ctx, o.cluster, clusterOptions{SimSpeed: o.simSpeed, Logger: log, RequestTimeout: o.nomadTimeout,
		GPUUse: nomad.UseConfig{Off: !o.gpuUse, Interval: o.gpuUseInterval, Rate: o.gpuUseRate}})
	if err != nil {
		return err
	}
	if c.Close != nil {
		defer c.Close()
	}
	src, err := o.sf.open(o.source, o.interval, limits, log)
	if err != nil {
		return err
	}
	if gs, ok := src.Source.(*git.Source); ok {
		defer gs.Close()
	}
	hookCh, trigger := triggerChan()
	hook, err := o.sf.webhook(src, log, trigger)
	if err != nil {
		return err
	}

	// 3. The loop, led by the election among replicas.
	cfg := o.loopConfig(ctx, c, src, hook, limits, log)
	cfg.Metrics = view.NewMetrics()
	notifier, err := o.notify.startNotifier(ctx, c.Name, src, cfg.Metrics, log)
	if err != nil {
		return err
	}
	cfg.News = notifier.News
	el := startElection(ctx, c, o.leaseTTL, log)
	if el != nil {
		cfg.Leader = el.Elector
	}
	loop, err := newLoop(cfg, c)
	if err != nil {
		return err
	}

	// 4. The status, served in the background.
	ln, addr, err := listenStatus(o.listen, o.addrFile)
	if err != nil {
		return err
	}
	srv := serveStatus(statusHandler(loop, hook, token, o.listen), ln, log)

	// 5. The loop, until ctx is done.
	changes, err := loopChanges(ctx, hookCh, src, el, log)
	if err != nil {
		return err
	}
	announce(log, src.Name, c.Name, addr, o.uiToken, token != "")
	runErr := loop.Run(ctx, changes)

	// 6. Shut down: the lease, then the server.
	shutDown(el, srv, log)
	return runErr
}

// check reports a wrong command line as a usage error, and sets the
// default --health-max-age from --interval.
func (o *reconcileOptions) check() error {
	if err := o.loopFlags.check("reconcile"); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--nomad-timeout", o.nomadTimeout}, {"--cycle-timeout", o.cycleTimeout}, {"--health-max-age", o.healthMaxAge}, {"--git-timeout", o.sf.gitTimeout}} {
		if d.v <= 0 {
			return usagef("%s %s: want a duration above 0", d.name, d.v)
		}
	}
	if !o.healthMaxAgeSet {
		// A quiet cluster has a cycle every interval: the default
		// leaves room for two.
		o.healthMaxAge = max(o.healthMaxAge, 2*o.interval)
	}
	if o.healthMaxAge <= o.interval {
		return usagef("--health-max-age %s must be longer than --interval %s: a healthy berth succeeds a cycle at least every interval", o.healthMaxAge, o.interval)
	}
	if err := o.notify.check(o.source); err != nil {
		return err
	}
	if o.gpuUseInterval < time.Second {
		return usagef("--gpu-use-interval %s: read each node at most once a second (default %s); --gpu-use=false turns the reading off", o.gpuUseInterval, nomad.DefaultUseInterval)
	}
	if !(o.gpuUseRate > 0) {
		return usagef("--gpu-use-rate %v: want requests a second above 0 (default %v); --gpu-use=false turns the reading off", o.gpuUseRate, nomad.DefaultUseRate)
	}
	if o.leaseTTL != 0 && o.leaseTTL < time.Second {
		return usagef("--lease-ttl %s: the leader lease must live at least 1s (default %s), or 0 to run without an election", o.leaseTTL, leader.DefaultLeaseTTL)
	}
	return nil
}

// loopConfig is the loop's configuration from the flags, the cluster and
// the source; it starts watching the cluster's changes when the cluster
// can.
func (o *reconcileOptions) loopConfig(ctx context.Context, c *openedCluster, src *openedSource, hook *api.Webhook, limits load.Limits, log *slog.Logger) reconcile.Config {
	cfg := reconcile.Config{
		Source: src.Source, Cluster: c.Cluster, Store: c.Store,
		Logger: log, LogTransitionFields: o.logFormat == "json",
		ClusterName: c.Name, BerthVersion: berthVersion(), Interval: o.interval,
		PruneDelay: o.sf.pruneDelay, AllowMassPrune: o.prune.allow,
		MassPrunePercent: o.prune.percent, MassPruneMin: o.prune.atMin,
		CycleTimeout: o.cycleTimeout, HealthMaxAge: o.healthMaxAge, Limits: limits,
	}
	if c.Watch != nil {
		// The cluster's changes start cycles but never cut a backoff short.
		cfg.ClusterChanges = c.Watch(ctx)
	}
	if c.Sample != nil {
		c.Sample(ctx) // stopped by ctx, and waited for by c.Close
	}
	if hook != nil {
		cfg.Debounce = 10 * time.Millisecond // a push is whole: no need to wait for quiet
	}
	return cfg
}

// election is the leader election among replicas, run in the background.
type election struct {
	*leader.Elector
	done chan struct{} // closed when the elector's Run returns
}

// startElection starts the election when the cluster keeps a lease and
// --lease-ttl is not 0; nil otherwise (this berth alone leads).
func startElection(ctx context.Context, c *openedCluster, ttl time.Duration, log *slog.Logger) *election {
	if c.Lease == nil || ttl <= 0 {
		return nil
	}
	el := &election{Elector: leader.NewElector(c.Lease, "", ttl, log), done: make(chan struct{})}
	el.Step(ctx) // a lone replica leads from its first cycle
	go func() { defer close(el.done); el.Run(ctx) }()
	return el
}

// newLoop makes the loop; a simulated cluster's accounting joins its
// metrics.
func newLoop(cfg reconcile.Config, c *openedCluster) (*reconcile.Loop, error) {
	loop, err := reconcile.New(cfg)
	if err != nil {
		return nil, err
	}
	if sc, ok := c.Cluster.(*sim.Cluster); ok {
		registerSimMetrics(loop.Metrics().Registry, sc)
	}
	return loop, nil
}

// listenStatus listens on --listen and writes the status API's URL to
// --addr-file when given; it returns the listener and that URL.
func listenStatus(listen, addrFile string) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", &exitError{Code: exitFailure, Err: fmt.Errorf("listen on %s: %w", listen, err)}
	}
	addr := "http://" + ln.Addr().String()
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(addr+"\n"), 0o644); err != nil {
			return nil, "", &exitError{Code: exitFailure, Err: err}
		}
	}
	return ln, addr, nil
}

// statusHandler is the HTTP surface of the loop (and of the webhook, when
// there is one), behind the bearer token; without a token it answers only
// requests addressed to loopback names.
func statusHandler(loop *reconcile.Loop, hook *api.Webhook, token, listen string) http.Handler {
	var routes func(*http.ServeMux)
	if hook != nil {
		routes = hook.Routes
	}
	handler := api.Handler(loop, routes)
	if token != "" {
		// Git webhooks (/api/v1/hooks/…) prove themselves with their
		// own signature: a forge cannot send berth's bearer token.
		return api.RequireToken(handler, token, "/api/v1/hooks/")
	}
	// No token: answer only to loopback names (DNS rebinding).
	return api.RequireLocalHost(handler, listen, "/api/v1/hooks/")
}

// serveStatus serves handler on ln in the background; a server that stops
// on its own is logged.
func serveStatus(handler http.Handler, ln net.Listener, log *slog.Logger) *http.Server {
	srv, sln := api.NewServer(handler, ln, api.DefaultServerLimits)
	go func() {
		if err := srv.Serve(sln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("status server stopped", "err", err.Error())
		}
	}()
	return srv
}

// loopChanges is what starts a cycle before the interval: a push to the
// webhook, or a change in a watched directory; and, with an election,
// this berth becoming the leader.
func loopChanges(ctx context.Context, hookCh <-chan struct{}, src *openedSource, el *election, log *slog.Logger) (<-chan struct{}, error) {
	changes := hookCh
	if src.WatchDir != "" {
		var err error
		if changes, err = watch.Dir(ctx, src.WatchDir, log); err != nil {
			return nil, &exitError{Code: exitFailure, Err: err}
		}
	}
	if el != nil {
		// A replica that becomes the leader runs a cycle at once.
		changes = reconcile.MergeChanges(ctx, changes, el.Changes())
	}
	return changes, nil
}

// announce logs where berth reads, drives and serves; with a token, how
// to send it. source is the source's name, without a password in its URL.
func announce(log *slog.Logger, source, cluster, addr, tokenFile string, withToken bool) {
	log.Info("berth reconciling", "source", source, "cluster", cluster, "status", addr+"/api/v1/status", "dashboard", addr+"/")
	if withToken {
		log.Info("the API, the dashboard's feed and /metrics need the bearer token in " + tokenFile + " (Authorization: Bearer TOKEN; berth status and explain: --token-file " + tokenFile + "; in the browser, paste it or open " + addr + "/#token=TOKEN)")
	}
}

// shutDown stops in order once the loop has returned, within 5 seconds:
// the election first (its lease released, the other replicas take over at
// once), then the status server.
func shutDown(el *election, srv *http.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if el != nil {
		<-el.done
		if err := el.Release(ctx); err != nil {
			log.Warn("the other replicas take over when the lease expires", "err", err.Error())
		}
	}
	srv.Shutdown(ctx)
	log.Info("berth stopped")
}

// registerSimMetrics exports a simulated cluster's accounting: GPU-seconds
// of work delivered and lost.
func registerSimMetrics(reg *prometheus.Registry, c *sim.Cluster) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "berth_sim_gpu_seconds_delivered_total", Help: "GPU-seconds the simulated cluster ran workspaces (simulated time).",
		}, func() float64 { return c.Stats().GPUSecondsDelivered }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "berth_sim_gpu_seconds_lost_total", Help: "GPU-seconds of work lost to stops without enough grace to checkpoint (simulated time).",
		}, func() float64 { return c.Stats().GPUSecondsLost }),
	)
}

// readUIToken reads the bearer token from file; it is required when
// listen is not a loopback address.
func readUIToken(file, listen string) (string, error) {
	if file == "" {
		if !api.IsLoopback(listen) {
			return "", usagef("--listen %s is not loopback: anyone who reaches it would see the cluster; give --ui-token-file FILE (a bearer token the API and the dashboard will require), or listen on 127.0.0.1", listen)
		}
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usagef("--ui-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", usagef("--ui-token-file %s: the token must be at least 16 characters (try: head -c 24 /dev/urandom | base64 > %s)", file, file)
	}
	return token, nil
}
