#!/usr/bin/env python3
"""bench_nomad.py ADDR WORK N PID2 PID1: the measuring half of bench-nomad.sh.

Waits for both nodes, makes node-1 ineligible and stops node-2's agent
(PID2) so that every workspace is placed on node-2 and none runs, writes N
0-GPU workspaces under WORK/specs, runs `berth apply` twice (the second
changes nothing) and prints berth's wall and CPU time against the sum of
Nomad's own placement times (each evaluation's ModifyTime - CreateTime)
and against the CPU the Nomad server (PID1) spent meanwhile.
"""
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

addr, work, n, pid2, pid1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def proc_cpu(pid):
    """CPU seconds (user + system) process pid has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get(path):
    with urllib.request.urlopen(addr + path, timeout=30) as r:
        return json.load(r)


def post(path, body):
    req = urllib.request.Request(addr + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


# 1. Two ready nodes, node-2 with its big disk.
deadline = time.time() + 120
while True:
    try:
        nodes = {x["Name"]: x for x in get("/v1/nodes?resources=true")}
        if len(nodes) == 2 and all(x["Status"] == "ready" for x in nodes.values()) and \
                (nodes["node-2"].get("NodeResources") or {}).get("Disk", {}).get("DiskMB", 0) >= 1000000:
            break
    except Exception:
        pass
    if time.time() > deadline:
        sys.exit("bench-nomad: the agents did not come back with the bench's config; see the node logs")
    time.sleep(0.3)
post("/v1/node/%s/eligibility" % nodes["node-1"]["ID"], {"NodeID": nodes["node-1"]["ID"], "Eligibility": "ineligible"})
os.kill(pid2, signal.SIGSTOP)

# 2. The specs.
specs = os.path.join(work, "specs")
os.makedirs(specs, exist_ok=True)
with open(os.path.join(specs, "base.yaml"), "w") as f:
    f.write("""apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: bench}
spec:
  tier: medium
  quota: {gpus: 0}
""")
with open(os.path.join(specs, "workspaces.yaml"), "w") as f:
    for i in range(n):
        f.write("""---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: ws-%04d, project: bench}
spec:
  owner: bench
  state: Running
  task: {driver: raw_exec, command: /bin/sh, args: ["-c", "sleep 3600"]}
  resources: {gpus: 0, memory: 16Mi}
""" % i)


def apply(label, extra=()):
    global server_cpu
    server0 = proc_cpu(pid1)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(work, "berth"), "apply", "--source", specs, "--cluster", "nomad", *extra],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    server_cpu = proc_cpu(pid1) - server0
    if p.returncode != 0:
        # Reported, not fatal: what was placed is still measured.
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        print("bench-nomad: %s exited %d: %s" % (label, p.returncode, last))
    return wall, cpu, p.stdout


profile = os.environ.get("BENCH_PROFILE")
wall, cpu, out = apply("apply", ["--cpuprofile", profile] if profile else [])
nomad_cpu = server_cpu
placed = 0
for a in get("/v1/allocations?namespace=*"):
    if a["DesiredStatus"] == "run" and a["NodeName"] == "node-2":
        placed += 1
evals = [e for e in get("/v1/evaluations?namespace=*") if e.get("TriggeredBy") == "job-register"]
times = [(e["ModifyTime"] - e["CreateTime"]) / 1e9 for e in evals if e["Status"] == "complete"]
nomad = sum(times)
# Nomad's busy time: the union of the evaluations' [create, modify]
# intervals (berth's concurrent submissions queue in Nomad's eval broker,
# which the sum counts once per waiting evaluation).
busy, end = 0.0, None
for c, m in sorted((e["CreateTime"] / 1e9, e["ModifyTime"] / 1e9) for e in evals if e["Status"] == "complete"):
    if end is None or c > end:
        busy += m - c
        end = m
    elif m > end:
        busy += m - end
        end = m
wall2, cpu2, out2 = apply("re-apply")
changed = [l for l in out2.splitlines() if l.startswith("plan (")]

print("bench-nomad: %d 0-GPU workspaces on a stopped client (Nomad v1.6.5, 2 cores)" % n)
print("  placed by Nomad:            %d allocations, %d register evaluations" % (placed, len(evals)))
print("  Nomad's placement time:     %.2f s (sum of eval create→modify; p50 %.1f ms, max %.1f ms)" %
      (nomad, 1000 * statistics.median(times) if times else 0, 1000 * max(times) if times else 0))
print("  Nomad busy placing:         %.2f s (union of those intervals)" % busy)
print("  berth apply:                %.2f s wall, %.2f s CPU (%.0f%% of wall); %.2fx the sum, %.2fx the busy time" %
      (wall, cpu, 100 * cpu / wall, wall / nomad if nomad else float("inf"), wall / busy if busy else float("inf")))
print("  CPU per workspace:          berth %.2f ms, the Nomad server %.2f ms (berth %.0f%% of Nomad's)" %
      (1000 * cpu / n, 1000 * nomad_cpu / n, 100 * cpu / nomad_cpu if nomad_cpu else float("inf")))
print("  no-change re-apply:         %.2f s wall, %.2f s CPU; %s" % (wall2, cpu2, changed[0] if changed else "?"))
if placed != n:
    sys.exit("bench-nomad: %d of %d workspaces placed" % (placed, n))
