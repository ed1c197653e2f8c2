#!/usr/bin/env python3
"""bench_fleet.py ADDR WORK DIR N: the measuring half of bench-fleet.sh.

A fleet on a real Nomad (the kit's scale mode, DIR/pids lists the agents):
node-1 (the server's own client) ineligible, clients 2.. stopped with
kill -STOP (the server places on them, nothing runs). N workspaces in 20
projects, one file each, about 3% with one GPU. It prints:

  1. the first `berth apply` of all of them against Nomad's own busy time
     placing them (the union of the register evaluations' create→modify);
  2. `berth apply` with one workspace's file changed, and with nothing
     changed; `berth plan` of a one-file change against the specs in git,
     through the cache and without it;
  3. `berth reconcile` on the directory: file written → job registered,
     p50 and p99 over 20 new workspaces;
  4. the requests berth makes to Nomad (through scripts/countproxy) and
     the CPU the Nomad server spends, over 2 idle minutes with berth
     attached, against 2 minutes without it, and from the server's own
     CPU profiles of both windows, what it spent on berth's requests;
  5. berth's peak RSS (apply and reconcile) and the top of reconcile's CPU
     profile.
"""
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

addr, work, dirpath, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
idle_s = int(os.environ.get("BENCH_IDLE", "120"))
berth = os.path.join(work, "berth")
pids = [int(x) for x in open(os.path.join(dirpath, "pids")).read().split()]
server_pid = pids[0]
projects = 20


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def post(path, body):
    req = urllib.request.Request(addr + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def say(*a):
    print("bench-fleet:", *a, flush=True)


# 1. The nodes: all ready; node-1 ineligible; the other clients stopped.
deadline = time.time() + 300
while True:
    try:
        nodes = get(addr + "/v1/nodes")
        if len(nodes) >= len(pids) and all(x["Status"] == "ready" for x in nodes):
            break
    except Exception:
        pass
    if time.time() > deadline:
        sys.exit("bench-fleet: the nodes did not all come up")
    time.sleep(1)
node1 = [x for x in nodes if x["Name"] == "node-1"][0]
post("/v1/node/%s/eligibility" % node1["ID"], {"NodeID": node1["ID"], "Eligibility": "ineligible"})
for pid in pids[1:]:
    os.kill(pid, signal.SIGSTOP)
gpu_nodes = len(pids) - 1

# 2. The specs: one file per workspace.
specs = os.path.join(work, "specs")
os.makedirs(specs, exist_ok=True)
with open(os.path.join(specs, "tiers.yaml"), "w") as f:
    f.write("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: medium}\nspec: {value: 50}\n---\n"
            "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: high}\nspec: {value: 80}\n")
for p in range(projects):
    os.makedirs(os.path.join(specs, "team-%02d" % p), exist_ok=True)
    with open(os.path.join(specs, "team-%02d" % p, "project.yaml"), "w") as f:
        f.write("apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: team-%02d}\nspec:\n  tier: %s\n  quota: {gpus: 16}\n"
                % (p, ["medium", "high"][p % 2]))


def workspace(i, name=None, env="1"):
    p = i % projects
    name = name or "ws-%05d" % i
    gpus = 1 if i % 33 == 0 else 0
    body = ("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: %s, project: team-%02d}\nspec:\n  owner: bench\n"
            "  state: Running\n  task: {driver: raw_exec, command: /bin/sh, args: [\"-c\", \"sleep 3600\"], env: {RUN: \"%s\"}}\n"
            "  resources: {gpus: %d, memory: 16Mi}\n" % (name, p, env, gpus))
    path = os.path.join(specs, "team-%02d" % p, name + ".yaml")
    with open(path + ".tmp", "w") as f:
        f.write(body)
    os.rename(path + ".tmp", path)  # whole, for the watch
    return "team-%02d" % p, name, gpus


gpu_ws = sum(workspace(i)[2] for i in range(n))


def apply(label, extra=()):
    server0 = proc_cpu(server_pid)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    # Each apply keeps its spec cache and version memo for the next one
    # (--cache-dir), as a platform engineer's would in ~/.cache/berth.
    p = subprocess.run([berth, "apply", "--source", specs, "--cluster", "nomad", "--cache-dir", os.path.join(work, "cache"), *extra],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        say("%s exited %d: %s" % (label, p.returncode, last))
    plan = [l for l in p.stdout.splitlines() if l.startswith("plan (")]
    return wall, cpu, proc_cpu(server_pid) - server0, after.ru_maxrss, plan[0] if plan else "?"


# 3. The first apply, against Nomad's busy time.
say("%d workspaces (%d with a GPU) in %d projects on %d stopped clients; first apply" % (n, gpu_ws, projects, gpu_nodes))
t_first = time.time()
wall, cpu, ncpu, rss_apply, plan = apply("first apply")
walls = [wall]
for _ in range(2):  # a cycle cut by its limit leaves the rest for the next
    placed = sum(1 for a in get(addr + "/v1/allocations?namespace=*", 300) if a["DesiredStatus"] == "run")
    if placed >= n:
        break
    say("first apply placed %d of %d; applying again" % (placed, n))
    w, c, nc, r, _ = apply("apply again")
    walls.append(w)
    cpu, ncpu, rss_apply = cpu + c, ncpu + nc, max(rss_apply, r)
placed = sum(1 for a in get(addr + "/v1/allocations?namespace=*", 300) if a["DesiredStatus"] == "run")
evals = [e for e in get(addr + "/v1/evaluations?namespace=*&per_page=100000", 300)
         if e.get("TriggeredBy") == "job-register" and e["Status"] == "complete" and e["CreateTime"] / 1e9 >= t_first - 1]
busy, end = 0.0, None
for c, m in sorted((e["CreateTime"] / 1e9, e["ModifyTime"] / 1e9) for e in evals):
    if end is None or c > end:
        busy, end = busy + m - c, m
    elif m > end:
        busy, end = busy + m - end, m
say("first apply: %.1f s wall (%s), %.1f s CPU; %d placed; Nomad busy placing %.1f s (%d register evaluations): %.2fx"
    % (sum(walls), " + ".join("%.1f" % w for w in walls), cpu, placed, busy, len(evals), sum(walls) / busy if busy else float("inf")))
if placed < n:
    # What Nomad did not place in three cycles is set Stopped, so what
    # follows measures a settled fleet (said, not hidden).
    live = {(a["Namespace"], a["JobID"]) for a in get(addr + "/v1/allocations?namespace=*", 300) if a["DesiredStatus"] == "run"}
    stopped = 0
    for i in range(n):
        ns, name = "team-%02d" % (i % projects), "ws-%05d" % i
        if (ns, name) not in live:
            path = os.path.join(specs, ns, name + ".yaml")
            body = open(path).read().replace("state: Running", "state: Stopped")
            with open(path, "w") as f:
                f.write(body)
            stopped += 1
    say("%d workspaces Nomad did not place in three cycles are set Stopped for the rest" % stopped)
    w, _, _, _, p = apply("apply of the stops")
    say("apply of the stops: %.1f s; %s" % (w, p))

# 4. berth apply of a one-file change, and of none.
workspace(1, env="2")
w1, c1, _, r1, plan1 = apply("one-file apply")
w0, c0, _, r0, plan0 = apply("no-change apply")
rss_apply = max(rss_apply, r1, r0)
say("apply, one file changed: %.2f s wall, %.2f s CPU; %s" % (w1, c1, plan1))
say("apply, nothing changed:  %.2f s wall, %.2f s CPU; %s" % (w0, c0, plan0))

# 4b. berth plan of a one-file change against the specs in git, through
# the cache the applies kept (plan and apply share it), and without it.
if shutil.which("git"):
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run(git + ["init", "-q"], cwd=specs, check=True)
    subprocess.run(git + ["add", "-A"], cwd=specs, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "base"], cwd=specs, check=True)
    workspace(1, env="3")
    time.sleep(10)  # git's 10,000 objects written, the applies' restart settled
    for label, cache in (("plan, one file changed", os.path.join(work, "cache")), ("plan, one file changed, --cache-dir ''", "")):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.monotonic()
        p = subprocess.run([berth, "plan", specs, "--cluster", "nomad", "--cache-dir", cache], capture_output=True, text=True)
        wall = time.monotonic() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        first = (p.stdout.splitlines() or ["?"])[0]
        if p.returncode != 0:
            first = "exited %d: %s" % (p.returncode, (p.stderr.strip().splitlines() or ["?"])[-1])
        say("%s: %.2f s wall, %.2f s CPU; %s" % (label, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), first))
else:
    say("no git here: berth plan is not measured")

# 5. The loop, through the counting proxy.
proxy = subprocess.Popen([os.path.join(work, "countproxy"), "-target", addr, "-addr-file", os.path.join(work, "proxy.addr"),
                          "-admin-file", os.path.join(work, "proxy.admin")])
for _ in range(100):
    if os.path.exists(os.path.join(work, "proxy.admin")):
        break
    time.sleep(0.1)
proxy_url = open(os.path.join(work, "proxy.addr")).read().strip()
admin = open(os.path.join(work, "proxy.admin")).read().strip()
profile = os.path.join(work, "reconcile.prof")
log = open(os.path.join(work, "reconcile.log"), "w")
t0 = time.monotonic()
rec = subprocess.Popen([berth, "reconcile", "--source", specs, "--cluster", "nomad://" + proxy_url.split("://", 1)[1],
                        "--listen", "127.0.0.1:0", "--addr-file", os.path.join(work, "berth.addr"), "--cpuprofile", profile,
                        "--log-level", "warn"], stdout=log, stderr=log)
while not os.path.exists(os.path.join(work, "berth.addr")):
    time.sleep(0.1)
api = open(os.path.join(work, "berth.addr")).read().strip()
while True:  # the first cycle done (/healthz is ok before it: it counts from the start)
    try:
        st = get(api + "/api/v1/status?limit=1", 10)
        if st.get("lastReconcile") and not st["lastReconcile"].get("error"):
            break
    except Exception:
        pass
    if rec.poll() is not None:
        sys.exit("bench-fleet: berth reconcile exited %d; see %s" % (rec.returncode, log.name))
    time.sleep(0.2)
say("reconcile: first cycle done %.1f s after start" % (time.monotonic() - t0))
time.sleep(5)

lat = []
for k in range(20):
    ns, name, _ = workspace(2 + 20 * k + (k % projects), name="new-%02d" % k)
    t = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen("%s/v1/job/%s?namespace=%s" % (addr, name, ns), timeout=10) as r:
                if r.status == 200:
                    break
        except urllib.error.HTTPError:
            pass
        if time.monotonic() - t > 60:
            sys.exit("bench-fleet: %s/%s was not registered within 60 s" % (ns, name))
        time.sleep(0.01)
    lat.append(time.monotonic() - t)
    time.sleep(1)
lat.sort()
say("loop, file written -> job registered (20 new workspaces): p50 %.2f s, p99 %.2f s, max %.2f s"
    % (statistics.median(lat), lat[min(len(lat) - 1, int(0.99 * len(lat)))], lat[-1]))

# 6. Idle: berth's requests and the server's CPU, with berth and without.
# The server's own idle CPU (most of it publishing 10,000 jobs' summary
# metrics every second) wanders by several points between windows, more
# than berth could add; so the server is also profiled through both
# windows, and what it spent serving HTTP (berth is its only HTTP client
# then; the profiles' own requests are left out) and applying Raft writes
# (the lease's) is what berth costs it. The window without berth is the
# control: nothing should be found there.
def profile_server(path):
    """Starts a CPU profile of the Nomad server for idle_s seconds into path."""
    def fetch():
        with urllib.request.urlopen("%s/v1/agent/pprof/profile?seconds=%d" % (addr, idle_s), timeout=idle_s + 60) as r:
            data = r.read()
        with open(path, "wb") as f:
            f.write(data)
    t = threading.Thread(target=fetch)
    t.start()
    return t


def profiled(path):
    """The seconds of a server profile spent on HTTP and Raft writes, and in all."""
    out = subprocess.run(["go", "tool", "pprof", "-top", "-nodecount=1000000", r"-focus=net/http\.\(\*conn\)\.serve|nomadFSM",
                          "-ignore=Pprof", path], capture_output=True, text=True).stdout
    # "accounting for 0.03s, 0.06% of 48s total" ("0" with no unit when
    # nothing is under focus).
    got = re.search(r"accounting for ([0-9.]+)(m?s)?, .* of ([0-9.]+)(m?s) total", out)
    if not got:
        sys.exit("bench-fleet: no CPU profile of the Nomad server in %s: %s" % (path, out[-300:]))
    scale = lambda v, u: float(v) / (1000 if u == "ms" else 1)
    return scale(got.group(1), got.group(2)), scale(got.group(3), got.group(4))


time.sleep(10)
with_prof, without_prof = os.path.join(work, "nomad-idle-with.prof"), os.path.join(work, "nomad-idle-without.prof")
prof = profile_server(with_prof)
c0 = get(admin + "/counts")
s0, b0, t0 = proc_cpu(server_pid), proc_cpu(rec.pid), time.monotonic()
time.sleep(idle_s)
c1 = get(admin + "/counts")
s1, b1, t1 = proc_cpu(server_pid), proc_cpu(rec.pid), time.monotonic()
prof.join()
with open("/proc/%d/status" % rec.pid) as f:
    hwm = [l for l in f if l.startswith("VmHWM")][0].split()[1]
rec.send_signal(signal.SIGINT)
rec.wait(timeout=60)
proxy.send_signal(signal.SIGINT)
delta = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
delta = {k: v for k, v in delta.items() if v}
stream = sum(v for k, v in delta.items() if "/v1/event/stream" in k)
other = sum(v for k, v in delta.items() if "/v1/event/stream" not in k)
minutes = (t1 - t0) / 60
say("idle %.0f s with berth reconcile attached: %d requests besides the event stream (%.1f a minute; %d stream (re)connects): %s"
    % (t1 - t0, other, other / minutes, stream, ", ".join("%s %d" % kv for kv in sorted(delta.items()))))
with_cpu = (s1 - s0) / (t1 - t0)
time.sleep(10)
prof = profile_server(without_prof)
s2, t2 = proc_cpu(server_pid), time.monotonic()
time.sleep(idle_s)
s3, t3 = proc_cpu(server_pid), time.monotonic()
prof.join()
without = (s3 - s2) / (t3 - t2)
say("Nomad server CPU, idle: %.2f%% of a core with berth attached, %.2f%% without (difference %.2f points, the server's own "
    "wandering more than berth); berth's own %.2f%%" % (100 * with_cpu, 100 * without, 100 * (with_cpu - without), 100 * (b1 - b0) / (t1 - t0)))
on_berth, with_total = profiled(with_prof)
on_none, without_total = profiled(without_prof)
say("Nomad server CPU spent on berth while idle (its CPU profile, sampled every 10 ms: HTTP served and Raft writes applied): "
    "%.2f s of the %.1f s it spent in the %.0f s with berth, %.3f%% of a core; %.2f s of %.1f s in the window without"
    % (on_berth, with_total, t1 - t0, 100 * on_berth / (t1 - t0), on_none, without_total))
say("peak RSS: berth apply %.0f MiB, berth reconcile %.0f MiB" % (rss_apply / 1024, int(hwm) / 1024))
top = subprocess.run(["go", "tool", "pprof", "-top", "-cum", "-nodecount=300", berth, profile], capture_output=True, text=True)
lines = top.stdout.splitlines()
print("bench-fleet: berth reconcile's CPU profile (the whole run: its first full read, the 20 changes, the idle minutes), berth's functions by cumulative time:")
print("\n".join([l for l in lines[:6] if l.startswith(("Duration", "Showing nodes"))] +
                [l for l in lines if "berth-dev/berth/" in l][:25]))
