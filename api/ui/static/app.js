// berth's dashboard: the state from GET /api/v1/events (a WebSocket: the
// whole state, then one delta per reconcile cycle), drawn with plain DOM.
"use strict";

const $ = (id) => document.getElementById(id);
const PALETTE = ["#2f6fdb", "#d9480f", "#2b8a3e", "#9c36b5", "#0b7285", "#c2255c", "#5c940d", "#e67700", "#364fc7", "#862e9c", "#087f5b", "#a61e4d"];
const MAX_EVENTS = 1000;
const LARGE_NODES = 8;    // up to this many nodes, GPU tiles are large and labelled
const MINIMAP_NODES = 24; // beyond this many, an overview map and a filter
const ROW = 30;           // px per node row in the virtualised list
const MAX_CHIPS = 18;     // workspaces shown per project
const STATE_ORDER = { Failed: 0, Preempting: 1, Moving: 1, Preempted: 2, Pending: 3, Starting: 4, Running: 5, Stopped: 6 };
const byNodeName = new Intl.Collator("en", { numeric: true }).compare;

let S = null;        // the dashboard state
let seq = -1;        // Seq of the last message applied
let lastEvent = 0;   // Seq of the last event applied
let ws = null;
let backoff = 500;   // ms before the next reconnect; doubles to 10s
let drawQueued = false;
let openWS = null;   // "project/name" of the workspace page shown

// ---- token (only when berth listens beyond loopback) ----
function token() { return sessionStorage.getItem("berth-token") || ""; }
function takeTokenFromHash() {
  const m = location.hash.match(/(?:^#|&)token=([^&]*)/);
  if (m) {
    sessionStorage.setItem("berth-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
}
function authHeaders() { const t = token(); return t ? { Authorization: "Bearer " + t } : {}; }
function b64url(s) {
  return btoa(String.fromCharCode(...new TextEncoder().encode(s))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// ---- connection ----
async function connect() {
  setConn("connecting", "connecting");
  try {
    const r = await fetch("/api/v1/status", { headers: authHeaders() });
    if (r.status === 401) { askToken(); return; }
  } catch (e) { retry(); return; }
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/v1/events";
  const protos = ["berth.v1"];
  if (token()) protos.push("bearer." + b64url(token()));
  ws = new WebSocket(url, protos);
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.type === "state") {
      S = m.state; seq = m.seq;
      S.nodes.sort((a, b) => byNodeName(a.name, b.name)); // gpu-2 before gpu-10
      lastEvent = S.events.length ? S.events[S.events.length - 1].seq : 0;
      backoff = 500;
      setConn("live", "live");
    } else if (m.type === "delta") {
      if (S === null || m.seq !== seq + 1) { ws.close(); return; } // out of order: start again
      applyDelta(m.delta); seq = m.seq;
    }
    scheduleDraw();
  };
  ws.onclose = () => { ws = null; retry(); };
}
function retry() {
  const wait = backoff;
  backoff = Math.min(backoff * 2, 10000);
  setConn("reconnecting", "reconnecting in " + Math.round(wait / 100) / 10 + "s");
  setTimeout(connect, wait);
}
function setConn(state, text) {
  const c = $("conn");
  c.dataset.state = state; c.textContent = text;
  c.className = "pill " + (state === "live" ? "pill-live" : "pill-off");
}
function askToken() {
  setConn("token", "needs a token");
  const f = $("login");
  f.hidden = false;
  f.onsubmit = (e) => {
    e.preventDefault();
    sessionStorage.setItem("berth-token", $("token").value.trim());
    f.hidden = true;
    connect();
  };
}

function applyDelta(d) {
  S.at = d.at; S.revision = d.revision; S.attempted = d.attempted; S.lastReconcile = d.lastReconcile;
  if (d.nodes || d.removedNodes) {
    const byName = new Map(S.nodes.map((n) => [n.name, n]));
    for (const n of d.nodes || []) byName.set(n.name, n);
    for (const n of d.removedNodes || []) byName.delete(n);
    S.nodes = [...byName.values()].sort((a, b) => byNodeName(a.name, b.name));
  }
  if (d.workspaces || d.removedWorkspaces) {
    const key = (w) => w.project + "/" + w.name;
    const byKey = new Map(S.workspaces.map((w) => [key(w), w]));
    for (const w of d.workspaces || []) byKey.set(key(w), w);
    for (const k of d.removedWorkspaces || []) byKey.delete(k);
    S.workspaces = [...byKey.values()].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    if (openWS && (d.workspaces || []).some((w) => key(w) === openWS)) loadWorkspace(openWS);
  }
  if (d.projects) S.projects = d.projects;
  if (d.queue) { S.queue = d.queue; S.queueTotal = d.queueTotal; }
  S.workspacesTotal = d.workspacesTotal;
  for (const e of d.events || []) if (e.seq > lastEvent) { S.events.push(e); lastEvent = e.seq; }
  if (S.events.length > MAX_EVENTS) S.events.splice(0, S.events.length - MAX_EVENTS);
}

// ---- helpers ----
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "style") e.style.cssText = v; // CSSOM: the CSP forbids style attributes
    else e[k] = v;
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}
function colorOf(project) {
  const i = S.projects.findIndex((p) => p.name === project);
  if (i >= 0) return PALETTE[i % PALETTE.length];
  let h = 0; for (const c of project) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}
function clock(t) { return t ? new Date(t).toISOString().slice(11, 19) : ""; }
function dur(seconds) {
  let s = Math.round(seconds || 0);
  if (s < 60) return s + "s";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60); s = s % 60;
  return h ? h + "h" + (m ? m + "m" : "") : m + "m" + (s ? s + "s" : "");
}
function wsLink(ref, text) { return el("a", { href: "#/ws/" + ref, text: text || ref }); }
function shortName(ref) { return ref.split("/")[1] || ref; }
function stateBadge(st) { return el("span", { class: "st st-" + st, text: st }); }

function scheduleDraw() {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => { drawQueued = false; draw(); });
}

// ---- drawing ----
function draw() {
  if (!S) return;
  $("cluster").textContent = S.cluster ? "cluster " + S.cluster : "";
  $("clock").textContent = S.at ? "cluster clock " + clock(S.at) : "";
  drawRevision(); drawCluster(); drawProjects(); drawQueue(); drawEvents();
}

function drawRevision() {
  const r = $("revision");
  r.replaceChildren();
  r.append(el("span", {}, "revision in force ", S.revision ? el("code", { text: S.revision.id }) : el("i", { text: "none yet" })));
  if (S.lastReconcile) {
    r.append(el("span", { class: "muted", text: "last cycle " + clock(S.lastReconcile.at) + ", " + S.lastReconcile.actions + " action(s)" + (S.lastReconcile.error ? ", error: " + S.lastReconcile.error : "") }));
  }
  if (S.attempted) {
    const ul = el("ul");
    for (const e of S.attempted.errors || []) ul.append(el("li", {}, el("code", { text: e })));
    r.append(el("div", { class: "refused", id: "refused" }, "last attempted revision ", el("code", { text: S.attempted.id }), " was refused; the revision above stays in force:", ul));
  }
}

function drawCluster() {
  const nodes = S.nodes;
  let gpus = 0, used = 0, bad = 0, other = 0, draining = 0;
  for (const n of nodes) {
    gpus += n.gpus.length;
    for (const g of n.gpus) { if (g.workspace) used++; if (g.heldBy) other++; else if (!g.healthy) bad++; }
    if (n.ready && !n.eligible) draining++;
  }
  $("cluster-sum").textContent = `${nodes.length} node${nodes.length === 1 ? "" : "s"} · ${used}/${gpus} GPUs in use` +
    (other ? ` · ${other} held by other jobs` : "") + (bad ? ` · ${bad} unhealthy` : "") + (draining ? ` · ${draining} draining` : "");
  const legend = $("legend");
  legend.replaceChildren(...S.projects.map((p) => el("span", {}, el("i", { class: "sw", style: "background:" + colorOf(p.name) }), p.name)),
    el("span", {}, el("i", { class: "sw", style: "background:var(--idle)" }), "idle"),
    el("span", {}, el("i", { class: "sw gpu stopping", style: "background-color:#888" }), "stopping"),
    el("span", {}, el("i", { class: "sw gpu unhealthy" }), "unhealthy"));
  const big = nodes.length > MINIMAP_NODES;
  $("minimap").hidden = !big;
  $("node-tools").hidden = !big;
  if (big) drawMinimap(nodes);
  drawNodes();
}

function visibleNodes() {
  const q = $("node-filter").value.trim().toLowerCase();
  if (!q) return S.nodes;
  return S.nodes.filter((n) => n.name.toLowerCase().includes(q) || n.gpus.some((g) => g.workspace && g.workspace.toLowerCase().includes(q)));
}

function drawMinimap(nodes) {
  // One cell per node, coloured by the project holding most of its GPUs;
  // faded by how much of it is idle. A click drills down to the node.
  const m = $("minimap");
  m.replaceChildren();
  for (const n of nodes) {
    const count = {};
    let held = 0, unhealthy = false;
    for (const g of n.gpus) { if (g.project) { count[g.project] = (count[g.project] || 0) + 1; held++; } if (!g.healthy) unhealthy = true; }
    const top = Object.keys(count).sort((a, b) => count[b] - count[a])[0];
    const c = el("i", { title: `${n.name}: ${held}/${n.gpus.length} GPUs in use` + (top ? ", mostly " + top : "") + (unhealthy ? ", unhealthy GPU" : "") + (!n.ready ? ", down" : !n.eligible ? ", draining" : "") });
    if (top) { c.style.background = colorOf(top); c.style.opacity = String(0.35 + 0.65 * held / Math.max(1, n.gpus.length)); }
    if (unhealthy || !n.ready) c.classList.add("bad"); else if (!n.eligible) c.classList.add("drain");
    c.onclick = () => { $("node-filter").value = n.name; drawNodes(); };
    m.append(c);
  }
}

function drawNodes() {
  const list = visibleNodes();
  const box = $("nodes"), inner = $("nodes-inner");
  const large = S.nodes.length <= LARGE_NODES;
  box.classList.toggle("large", large);
  $("node-count").textContent = list.length === S.nodes.length ? "" : `${list.length} of ${S.nodes.length} nodes`;
  if (large) { // few nodes: draw them all, big
    inner.style.height = "";
    inner.replaceChildren(...list.map((n) => nodeRow(n, true)));
    return;
  }
  // Virtualised: only the rows in view (and a few around) are in the DOM.
  inner.style.height = list.length * ROW + "px";
  const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 5);
  const last = Math.min(list.length, first + Math.ceil((box.clientHeight || 460) / ROW) + 10);
  const rows = [];
  for (let i = first; i < last; i++) {
    const r = nodeRow(list[i], false);
    r.style.position = "absolute"; r.style.top = i * ROW + "px"; r.style.left = "0"; r.style.right = "0";
    rows.push(r);
  }
  inner.replaceChildren(...rows);
}

function nodeRow(n, large) {
  const row = el("div", { class: "node" + (n.ready ? "" : " down"), "data-node": n.name },
    el("span", { class: "name", title: n.name + (n.pool ? " (pool " + n.pool + ")" : ""), text: n.name }));
  if (!n.ready) row.append(el("span", { class: "badge down", text: "down" }));
  else if (!n.eligible) row.append(el("span", { class: "badge draining", text: "draining" }));
  if (n.topologyGuessed) row.append(el("span", { class: "badge guessed", title: "no topology from berth agent: one NVLink domain and NUMA node assumed", text: "topology?" }));
  // NUMA node → NVLink domain → GPUs.
  const numas = new Map();
  for (const g of n.gpus) {
    if (!numas.has(g.numa)) numas.set(g.numa, new Map());
    const doms = numas.get(g.numa);
    if (!doms.has(g.domain)) doms.set(g.domain, []);
    doms.get(g.domain).push(g);
  }
  for (const [numa, doms] of [...numas].sort((a, b) => a[0] - b[0])) {
    const box = el("span", { class: "numa", title: "NUMA node " + numa }, el("span", { class: "lbl", text: "N" + numa }));
    for (const [dom, gs] of [...doms].sort((a, b) => a[0] - b[0])) {
      const d = el("span", { class: "dom", title: "NVLink domain " + dom }, el("span", { class: "lbl", text: "nv" + dom }));
      for (const g of gs) d.append(gpuTile(n, g, large));
      box.append(d);
    }
    row.append(box);
  }
  return row;
}

function gpuTile(n, g, large) {
  const w = g.workspace ? S.workspaces.find((x) => x.project + "/" + x.name === g.workspace) : null;
  const state = w ? w.state : "";
  const title = `${n.name} GPU ${g.index} (${g.model}) · NVLink ${g.domain} · NUMA ${g.numa}` +
    (g.heldBy ? ` · held by another job (${g.heldBy})` : g.healthy ? "" : " · UNHEALTHY") +
    (g.workspace ? `\n${g.workspace} — ${state || g.phase}` : g.heldBy ? "" : "\nidle");
  const t = el("span", { class: "gpu" + (g.workspace ? " " + g.phase : " idle") + (g.healthy ? "" : " unhealthy"), title,
    "data-gpu": g.id, "data-workspace": g.workspace || null, "data-state": state || null });
  if (g.workspace) {
    t.style.backgroundColor = colorOf(g.project);
    t.onclick = () => { location.hash = "#/ws/" + g.workspace; };
  }
  if (large) {
    if (g.workspace) t.append(el("b", { text: shortName(g.workspace) }), el("br"), (state || g.phase) + " · GPU " + g.index);
    else t.append((g.heldBy ? "held by " + g.heldBy : g.healthy ? "idle" : "unhealthy") + " · GPU " + g.index, el("br"), g.model);
  }
  return t;
}

// cores writes millicores as CPUs: "8", "2.5", "0.25".
function cores(m) { return String(Math.round(m) / 1000); }

// bytes writes a size as policies.Bytes does: "64 GiB", "1.5 GiB", "300 MiB".
function bytes(b) {
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  if (Math.abs(b) < 1024) return b + " bytes";
  let v = b, u = "";
  for (const unit of units) {
    if (Math.abs(v / 1024) < 1) break;
    v /= 1024; u = unit;
  }
  return (Number.isInteger(v) ? String(v) : v.toFixed(1).replace(/\.0$/, "")) + " " + u;
}

// quotaFigures are a project's CPU and memory against its quota, where
// the quota names them.
function quotaFigures(p) {
  const out = [];
  const dims = [
    ["cpu", "CPU", p.quotaCPUMilli, p.usedCPUMilli, p.borrowedCPUMilli, p.borrowLimitCPUMilli, cores],
    ["memory", "memory", p.quotaMemoryBytes, p.usedMemoryBytes, p.borrowedMemoryBytes, p.borrowLimitMemoryBytes, bytes],
  ];
  for (const [cls, name, quota, used, borrowed, limit, fmt] of dims) {
    if (!quota) continue;
    out.push(el("span", { class: "quota-" + cls, title: `${name} as the quota counts it: each replica's resources` },
      `${name} ${fmt(used || 0)} / ${fmt(quota)}` + (borrowed ? ` (${fmt(borrowed)} borrowed)` : "") +
      ` · may borrow ${limit == null ? "unlimited" : fmt(limit)}`));
  }
  return out;
}

// kindFigures are a project's GPUs per kind its quota names (quota.kinds);
// the project's own GPU figures then count its other GPUs.
function kindFigures(p) {
  return (p.kinds || []).map((k) => el("span", { class: "quota-kind", "data-kind": k.kind, title: `GPUs of kind ${k.kind}: its workspaces that ask for it` },
    `${k.kind} ${k.usedGPUs} / ${k.quotaGPUs}` + (k.borrowedGPUs ? ` (${k.borrowedGPUs} borrowed)` : "") +
    ` · may borrow ${k.borrowLimitGPUs == null ? "unlimited" : k.borrowLimitGPUs}`));
}

function drawProjects() {
  const box = $("projects");
  box.replaceChildren();
  for (const p of S.projects) {
    const cap = Math.max(p.quotaGPUs + (p.borrowLimitGPUs ?? 0), p.usedGPUs, 1);
    const inQuota = Math.min(p.usedGPUs, p.quotaGPUs);
    const color = colorOf(p.name);
    const bar = el("div", { class: "bar", title: `${p.usedGPUs} GPUs in use; quota ${p.quotaGPUs}; ${p.borrowedGPUs} borrowed` },
      el("div", { class: "used", style: `width:${100 * inQuota / cap}%;background:${color}` }),
      el("div", { class: "borrowed", style: `left:${100 * inQuota / cap}%;width:${100 * p.borrowedGPUs / cap}%;background-color:${color}` }),
      el("div", { class: "quota", style: `left:calc(${100 * p.quotaGPUs / cap}% - 1px)` }));
    const chips = el("div", { class: "chips" });
    // Those that need attention first; at most MAX_CHIPS, then a count.
    const mine = S.workspaces.filter((w) => w.project === p.name)
      .sort((a, b) => (STATE_ORDER[a.state] ?? 9) - (STATE_ORDER[b.state] ?? 9));
    for (const w of mine.slice(0, MAX_CHIPS)) {
      chips.append(el("a", { class: "ws", href: "#/ws/" + w.project + "/" + w.name, "data-workspace": w.project + "/" + w.name, "data-state": w.state, title: w.reason || w.state },
        el("i", { class: "dot", style: "background:" + color }), w.name,
        w.gpuKind ? el("span", { class: "gpu-kind", title: "GPU kind", text: w.gpuKind }) : null, stateBadge(w.state), useChip(w.gpuUse)));
    }
    // The counts are the server's: a large tree's state holds only the
    // workspaces shown.
    const more = Object.assign({}, p.states);
    for (const w of mine.slice(0, MAX_CHIPS)) more[w.state] = (more[w.state] || 0) - 1;
    const rest = Object.entries(more).filter(([, n]) => n > 0).sort(([a], [b]) => (STATE_ORDER[a] ?? 9) - (STATE_ORDER[b] ?? 9));
    if (rest.length) {
      chips.append(el("span", { class: "muted", text: "and " + rest.map(([st, n]) => n + " more " + st).join(", ") }));
    }
    const borrow = p.borrowLimitGPUs == null ? "unlimited" : String(p.borrowLimitGPUs);
    box.append(el("div", { class: "project", "data-project": p.name },
      el("div", { class: "top" }, el("i", { class: "sw", style: "background:" + color }), el("b", { text: p.name }),
        el("span", { class: "tier", text: `${p.tier} ${p.tierValue}` }),
        el("span", { class: "muted", text: `${p.usedGPUs} / ${p.quotaGPUs} GPUs` + (p.borrowedGPUs ? ` (${p.borrowedGPUs} borrowed)` : "") })),
      bar,
      el("div", { class: "figures" },
        el("span", { text: (p.kinds ? "other GPUs: " : "") + `quota ${p.quotaGPUs} · may borrow ${borrow}` }),
        ...kindFigures(p),
        ...quotaFigures(p),
        el("span", { title: "time-decayed GPU usage", text: `decayed usage ${(p.decayedUsage / 3600).toFixed(2)} GPU-h` }),
        el("span", { title: "fair-share weight over all weights, and decayed usage over all projects'", text: `share ${(100 * p.share).toFixed(0)}% · using ${(100 * p.usageShare).toFixed(0)}%` }),
        el("span", { class: "waiting", text: p.waitingTotal
          ? "waiting: " + p.waiting.slice(0, 4).map(shortName).join(", ") + (p.waitingTotal > 4 ? ` and ${p.waitingTotal - 4} more` : "")
          : "none waiting" })),
      chips));
  }
}

function drawQueue() {
  const body = $("queue").tBodies[0];
  body.replaceChildren();
  $("queue-empty").hidden = S.queue.length > 0;
  $("queue").hidden = S.queue.length === 0;
  const hidden = (S.queueTotal || 0) - S.queue.length;
  $("queue-more").hidden = hidden <= 0;
  $("queue-more").textContent = hidden > 0 ? `… and ${hidden} more waiting (berth status --all lists every workspace)` : "";
  for (const q of S.queue) {
    body.append(el("tr", { "data-workspace": q.workspace },
      el("td", { text: q.position ? String(q.position) : "–" }),
      el("td", {}, wsLink(q.workspace), " ", stateBadge(q.state)),
      el("td", { text: q.tier || "" }),
      el("td", { text: String(q.gpus) }),
      el("td", {}, q.reasonKind ? el("span", { class: "why", text: q.reasonKind }) : null, q.reason || ""),
      el("td", { class: "mono", text: clock(q.queuedSince) }),
      q.estimatedStart
        ? el("td", { "data-estimate": q.estimatedStart }, el("span", { class: "mono", text: "~" + clock(q.estimatedStart) }), el("div", { class: "d muted", text: q.estimate }))
        : el("td", { title: q.estimate || "berth cannot tell: capacity frees up when running work ends", text: "—" })));
  }
}

function drawEvents() {
  const sel = $("event-filter");
  const want = sel.value;
  const names = S.projects.map((p) => p.name);
  if ([...sel.options].slice(1).map((o) => o.value).join("\n") !== names.join("\n")) {
    sel.replaceChildren(el("option", { value: "", text: "all projects" }), ...names.map((n) => el("option", { value: n, text: n })));
    sel.value = want;
  }
  const list = $("events");
  list.replaceChildren();
  const shown = S.events.filter((e) => !want || e.project === want).slice(-300).reverse();
  $("events-empty").hidden = shown.length > 0;
  for (const e of shown) {
    const detail = [];
    if (e.preemptedBy && e.kind === "preempted" && !(e.reason || "").includes(e.preemptedBy)) detail.push("by " + e.preemptedBy);
    if (e.atRiskSeconds) detail.push("work at risk " + dur(e.atRiskSeconds) + (e.graceSeconds ? ", grace " + dur(e.graceSeconds) + " to checkpoint" : ""));
    if (e.node) detail.push("on " + e.node);
    if (e.progressSeconds) detail.push("progress " + dur(e.progressSeconds));
    if (e.workLostSeconds) detail.push("lost " + dur(e.workLostSeconds));
    list.append(el("li", { "data-workspace": e.workspace, "data-from": e.from || "", "data-to": e.to, "data-kind": e.kind },
      el("span", { class: "t", text: clock(e.at) }),
      el("span", { class: "kind k-" + e.kind, text: e.kind }),
      el("div", {},
        el("div", {}, wsLink(e.workspace), " ", el("span", { class: "tr", text: (e.from || "new") + " → " + e.to })),
        e.reason ? el("div", { class: "d", text: e.reason }) : null,
        detail.length ? el("div", { class: "d", text: detail.join(" · ") }) : null)));
  }
}

// ---- workspace page (#/ws/PROJECT/NAME) ----
async function loadWorkspace(ref) {
  const [p, n] = ref.split("/");
  let d;
  try {
    const r = await fetch(`/api/v1/workspaces/${encodeURIComponent(p)}/${encodeURIComponent(n)}`, { headers: authHeaders() });
    d = await r.json();
    if (!r.ok) throw new Error(d.error || r.statusText);
  } catch (e) {
    $("ws-title").textContent = ref; $("ws-status").textContent = String(e.message || e);
    return;
  }
  if (openWS !== ref) return;
  const w = d.workspace;
  $("ws-title").replaceChildren(ref + " ", stateBadge(w.state));
  $("ws-status").replaceChildren(el("div", { class: "figures" },
    w.node ? el("span", { text: "on " + w.node + " " + (w.gpus || []).join(", ") }) : null,
    w.gpuKind ? el("span", { class: "gpu-kind", text: "GPU kind " + w.gpuKind }) : null,
    el("span", { text: "since " + clock(w.since) }),
    el("span", { text: "progress " + dur(w.progressSeconds) }),
    el("span", { text: "work lost " + dur(w.workLostSeconds) }),
    w.decision ? el("span", { text: "decision: " + w.decision }) : null,
    endFigure(w.lastEnd),
    useFigure(w.gpuUse, (w.gpus || []).length),
    likelyFigure(w.likelyStart),
    w.runTime ? el("span", { class: "run-time", text: "expected run " + dur(w.runTime.medianSeconds) +
      (w.runTime.lowSeconds !== w.runTime.highSeconds ? " (" + dur(w.runTime.lowSeconds) + "–" + dur(w.runTime.highSeconds) + ")" : "") +
      (w.runTime.pastRuns ? ", from " + w.runTime.pastRuns + " past run" + (w.runTime.pastRuns === 1 ? "" : "s") : ", as stated") }) : null));
  // Connect: where its ports are, from the allocation Nomad placed.
  const eps = w.endpoints || [];
  const gang = eps.some((e) => e.replica !== eps[0].replica);
  $("ws-connect").hidden = eps.length === 0;
  $("ws-connect-list").replaceChildren(...eps.map((e) => el("li", {},
    (gang ? "replica " + e.replica + " " : "") + e.label + ": ",
    /^https?:\/\//.test(e.address) ? el("a", { href: e.address, target: "_blank", rel: "noopener", text: e.address })
      : el("span", { text: e.address }))));
  $("ws-explain").replaceChildren(...(d.explanation || []).map((s) => el("p", { class: "explain", text: s })));
  const body = $("ws-history").tBodies[0];
  body.replaceChildren(...(d.history || []).map((t) => el("tr", {},
    el("td", { class: "mono", text: clock(t.at) }),
    el("td", {}, (t.from || "new") + " → ", stateBadge(t.to)),
    el("td", { class: "mono", text: t.node ? t.node + " " + (t.gpus || []).join(",") : "" }),
    el("td", { text: dur(t.progressSeconds) + (t.workLostSeconds ? " (lost " + dur(t.workLostSeconds) + ")" : "") }),
    el("td", { text: (t.reason || "") + (t.preemptedBy ? " [by " + t.preemptedBy + "]" : "") }))));
}
// likelyFigure: when a waiting workspace is likely to start, on the
// cluster's clock (the explanation below says it in hours from now).
// endFigure: how its last run that berth did not stop ended (whose
// fault: the task's or the node's), when it failed.
function endFigure(e) {
  if (!e || e.class === "completed") return null;
  let t = e.class === "node-fault" ? "last end: the node's fault" : "last end: the task failed";
  if (e.exitCode) t += ", exit code " + e.exitCode;
  if (e.node) t += " on " + e.node;
  if (e.attempts > 1) t += " (" + e.attempts + " in a row)";
  return el("span", { class: "last-end " + e.class, text: t });
}

// pct: a utilization as a whole percent ("<1%" when busy but below one).
function pct(p) {
  return p > 0 && p < 0.5 ? "<1%" : Math.round(p) + "%";
}
// useChip: a running workspace's GPU utilization on its chip (its busiest
// GPU's, at the last reading); idle (0%) stands out.
function useChip(u) {
  if (!u) return null;
  const title = `GPU utilization: ${pct(u.maxPercent)} at most, ${pct(u.meanPercent)} on average over ${u.gpus} GPU${u.gpus === 1 ? "" : "s"}, read at ${clock(u.at)}`;
  return el("span", { class: "gpu-use" + (Math.round(u.maxPercent) === 0 ? " idle" : ""), title, text: pct(u.maxPercent) });
}
function useFigure(u, held) {
  if (!u) return null;
  let t = "GPU utilization " + pct(u.maxPercent);
  if (u.gpus > 1) t += " at most, " + pct(u.meanPercent) + " on average over " + u.gpus + " GPUs";
  if (held > u.gpus) t += " (" + (held - u.gpus) + " report none)";
  return el("span", { class: "gpu-use-figure", text: t + ", read at " + clock(u.at) });
}

function likelyFigure(l) {
  if (!l) return null;
  if (!l.known) {
    const why = l.unknownRunning || l.unknownAhead
      ? "no run time known for " + (l.unknownRunning + (l.unknownAhead || 0)) + " workspace(s) it waits on"
      : "it needs more GPUs than the cluster has";
    return el("span", { class: "likely", text: "likely start unknown: " + why });
  }
  const range = l.earliest === l.latest ? clock(l.likely) : clock(l.earliest) + "–" + clock(l.latest);
  return el("span", { class: "likely", text: "likely start " + range + " (most likely " + clock(l.likely) + ")" });
}
function route() {
  const m = location.hash.match(/^#\/ws\/([^/]+\/[^/]+)$/);
  openWS = m ? decodeURIComponent(m[1]) : null;
  $("ws-page").hidden = !openWS;
  if (openWS) { $("ws-title").textContent = openWS; loadWorkspace(openWS); }
}

document.addEventListener("DOMContentLoaded", () => {
  takeTokenFromHash();
  $("nodes").addEventListener("scroll", () => { if (S) drawNodes(); }, { passive: true });
  $("node-filter").addEventListener("input", () => { if (S) drawNodes(); });
  $("event-filter").addEventListener("change", () => { if (S) drawEvents(); });
  $("ws-page").addEventListener("click", (e) => { if (e.target === $("ws-page")) location.hash = ""; });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && openWS) location.hash = ""; });
  window.addEventListener("hashchange", route);
  route();
  connect();
});
