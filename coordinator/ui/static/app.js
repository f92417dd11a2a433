// weir's console: a client of the JSON API that redraws every second.
// Routes (in the hash): #/ the overview, #/jobs/ID the job's graph,
// #/jobs/ID/checkpoints and #/jobs/ID/exceptions.

const main = document.getElementById("main");
const updated = document.getElementById("updated");
const leaderEl = document.getElementById("leader");
let selected = {}; // job id -> selected vertex name
let timer = null;

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const num = (n, digits = 0) => (n ?? 0).toLocaleString("en-US", { maximumFractionDigits: digits });
const bytes = (n) => {
  n = n || 0;
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${num(n, i ? 1 : 0)} ${u[i]}`;
};
const ago = (t) => {
  if (!t) return "–";
  const s = (Date.now() - new Date(t).getTime()) / 1000;
  if (s < 0) return "just now";
  if (s < 90) return `${num(s)} s ago`;
  if (s < 5400) return `${num(s / 60)} min ago`;
  return `${num(s / 3600, 1)} h ago`;
};
const span = (from, to) => {
  if (!from || from.startsWith("0001")) return "–";
  const end = to && !to.startsWith("0001") ? new Date(to).getTime() : Date.now();
  const s = Math.max(0, (end - new Date(from).getTime()) / 1000);
  if (s < 120) return `${num(s)} s`;
  if (s < 7200) return `${num(s / 60)} min`;
  return `${num(s / 3600, 1)} h`;
};
// lag is how far a watermark is behind the wall clock.
const lag = (wm) => {
  const s = Math.max(0, (Date.now() - wm) / 1000);
  if (s < 120) return `${num(s, 1)} s`;
  if (s < 7200) return `${num(s / 60)} min`;
  if (s < 172800) return `${num(s / 3600, 1)} h`;
  return `${num(s / 86400)} d`;
};
const isEnded = (st) => st === "FINISHED" || st === "FAILED" || st === "CANCELED";

async function api(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  if (!r.ok) {
    let msg = r.statusText;
    try { msg = (await r.json()).error || msg; } catch (_) { /* not JSON */ }
    const e = new Error(`${path}: ${msg}`);
    e.status = r.status;
    throw e;
  }
  return r.json();
}

// vertexRates sums a vertex's subtasks' per-second rates (busy, idle and
// backpressured are averaged over subtasks: ms of each second).
function vertexRates(v) {
  const out = { in: 0, out: 0, sink: 0, busy: 0, idle: 0, bp: 0, n: 0, wm: null };
  for (const t of v.tasks || []) {
    if (t.stats && t.stats.watermark > -9e15 && (out.wm === null || t.stats.watermark < out.wm)) out.wm = t.stats.watermark;
    const r = t.rates;
    if (!r) continue;
    out.in += r.recordsInPerSecond; out.out += r.recordsOutPerSecond; out.sink += r.sinkRowsPerSecond || 0;
    out.busy += r.busyTimeMsPerSecond; out.idle += r.idleTimeMsPerSecond; out.bp += r.backPressuredTimeMsPerSecond;
    out.n++;
  }
  if (out.n) { out.busy /= out.n; out.idle /= out.n; out.bp /= out.n; }
  return out;
}

// jobRates: events read by the sources and rows into the sinks.
function jobRates(st) {
  let inRate = 0, outRate = 0;
  for (const v of st.vertices || []) {
    const r = vertexRates(v);
    if (!(v.inputs || []).length) inRate += r.in;
    outRate += r.sink;
  }
  return { inRate, outRate };
}

async function overview() {
  const [jobs, workers] = await Promise.all([api("/api/v1/jobs"), api("/api/v1/workers")]);
  const full = await Promise.all(jobs.map(async (j) => {
    if (isEnded(j.state)) return { j, st: j, cps: [] };
    const st = await api(`/api/v1/jobs/${encodeURIComponent(j.id)}`).catch(() => j);
    const cps = st.checkpoints ? await api(`/api/v1/jobs/${encodeURIComponent(j.id)}/checkpoints`).catch(() => []) : [];
    return { j, st, cps };
  }));
  let h = `<h2>Jobs</h2><table id="jobs"><tr><th>Job</th><th>State</th><th class="num">Attempt</th><th class="num">Restarts</th><th>Uptime</th>
    <th class="num">Events in/s</th><th class="num">Rows to sinks/s</th><th class="num">Events in</th><th class="num">Rows to sinks</th><th>Last checkpoint</th></tr>`;
  if (!jobs.length) h += `<tr><td colspan="10" class="muted">No jobs yet: weir deploy SPEC.yaml</td></tr>`;
  for (const { j, st, cps } of full) {
    const r = isEnded(j.state) ? { inRate: 0, outRate: 0 } : jobRates(st);
    const last = cps.find((c) => c.status === "COMPLETED");
    const lastAt = last ? new Date(new Date(last.triggered).getTime() + (last.durationSeconds || 0) * 1000) : null;
    h += `<tr class="job-row" data-job="${esc(j.id)}"><td><a class="job" data-job="${esc(j.id)}" href="#/jobs/${encodeURIComponent(j.id)}">${esc(j.id)}</a></td>
      <td class="state ${esc(j.state)}">${esc(j.state)}</td><td class="num">${j.attempt}</td><td class="num">${j.restarts}</td>
      <td>${span(j.started, j.ended)}</td><td class="num rate-in">${num(r.inRate)}</td><td class="num rate-out">${num(r.outRate)}</td>
      <td class="num">${num(j.totals.recordsIn)}</td><td class="num">${num(j.totals.sinkIn)}</td>
      <td>${st.checkpoints ? (lastAt ? `#${last.id}, ${ago(lastAt)}` : "none yet") : '<span class="muted">off</span>'}</td></tr>`;
  }
  h += `</table><h2>Workers</h2><table id="workers"><tr><th>Worker</th><th class="num">Slots</th><th class="num">Tasks</th><th class="num">CPU (cores)</th>
    <th class="num">Memory</th><th>Last heartbeat</th><th>Host</th><th class="num">PID</th><th>Started</th></tr>`;
  if (!workers.length) h += `<tr><td colspan="9" class="muted">No workers registered</td></tr>`;
  for (const w of workers) {
    const u = w.usage;
    h += `<tr class="worker"><td>${esc(w.id)}</td><td class="num">${w.slots}</td><td class="num tasks">${u ? u.tasks : "–"}</td>
      <td class="num cpu">${u ? num(u.cpuCores, 2) : "–"}</td><td class="num mem">${u ? bytes(u.rssBytes) : "–"}</td><td class="heartbeat">${u ? ago(u.at) : "–"}</td>
      <td>${esc(w.host)}</td><td class="num">${w.pid}</td><td>${span(w.started)} ago</td></tr>`;
  }
  return h + "</table>";
}

// layout places vertices in columns by their distance from the sources.
function layout(vertices) {
  const byName = new Map(vertices.map((v) => [v.name, v]));
  const level = new Map();
  const lv = (v, seen = new Set()) => {
    if (level.has(v.name)) return level.get(v.name);
    if (seen.has(v.name)) return 0;
    seen.add(v.name);
    let l = 0;
    for (const e of v.inputs || []) if (byName.has(e.from)) l = Math.max(l, lv(byName.get(e.from), seen) + 1);
    level.set(v.name, l);
    return l;
  };
  vertices.forEach((v) => lv(v));
  const cols = [];
  for (const v of vertices) (cols[level.get(v.name)] ||= []).push(v);
  const W = 230, H = 112, GX = 150, GY = 26, pos = new Map();
  cols.forEach((col, c) => col.forEach((v, r) => pos.set(v.name, { x: 20 + c * (W + GX), y: 20 + r * (H + GY) })));
  const width = 40 + cols.length * (W + GX) - GX;
  const height = 40 + Math.max(...cols.map((c) => c.length)) * (H + GY) - GY;
  return { pos, W, H, width, height };
}

function graph(st) {
  const vs = st.vertices || [];
  const { pos, W, H, width, height } = layout(vs);
  let s = `<svg class="graph" id="graph" viewBox="0 0 ${width} ${height}" style="max-width:${width}px">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#9aa3b2"/></marker></defs>`;
  for (const v of vs) for (const e of v.inputs || []) {
    const a = pos.get(e.from), b = pos.get(v.name);
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    const bps = edgeBytes(vs.find((x) => x.name === e.from), v.name);
    s += `<g class="edge" data-from="${esc(e.from)}" data-to="${esc(v.name)}"><path d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}"/>
      <text x="${mx}" y="${(y1 + y2) / 2 - 5}" text-anchor="middle">${esc(e.partitioning)}${bps === null ? "" : ` · ${bytes(bps)}/s`}</text></g>`;
  }
  for (const v of vs) {
    const p = pos.get(v.name), r = vertexRates(v);
    const busy = r.busy / 1000, hue = Math.round(120 * (1 - Math.min(1, busy)));
    const fill = r.n ? `hsl(${hue},65%,${92 - 14 * busy}%)` : "#eef0f4";
    const sel = selected[st.id] === v.name ? " selected" : "";
    const wm = r.wm !== null ? `${new Date(r.wm).toISOString().slice(11, 19)} (lag ${lag(r.wm)})` : "–";
    s += `<g class="vertex${sel}" data-vertex="${esc(v.name)}" transform="translate(${p.x},${p.y})">
      <rect width="${W}" height="${H}" fill="${fill}"${r.bp > 500 ? ' stroke-dasharray="5 3"' : ""}/>
      <text class="name" x="10" y="19">${esc(v.name)}</text><text x="${W - 10}" y="19" text-anchor="end">×${v.parallelism}</text>
      <text class="rate" x="10" y="40">in ${num(r.in)}/s · out ${num(r.out)}/s</text>
      <text class="busy" x="10" y="59">busy ${num(r.busy / 10)}% · backpressured ${num(r.bp / 10)}%</text>
      <text class="wm" x="10" y="78">watermark ${wm}</text>
      <text class="nodes" x="10" y="97">${esc((v.nodes || []).join(" → "))}</text></g>`;
  }
  return s + "</svg>";
}

// edgeBytes sums the bytes per second vertex from sends to vertex to
// (null when no subtask has rates yet, or from is chained into to).
function edgeBytes(from, to) {
  let sum = null;
  for (const t of (from && from.tasks) || []) {
    const b = t.rates && t.rates.bytesOutPerSecond;
    if (b && to in b) sum = (sum || 0) + b[to];
  }
  return sum;
}

// creditWaits sums a subtask's output channels' waits for credit.
function creditWaits(stats) {
  let n = 0, s = 0;
  for (const c of stats.channels || []) { n += c.creditWaits; s += c.creditWaitSeconds; }
  return { n, s };
}

function subtasks(st) {
  const v = (st.vertices || []).find((x) => x.name === selected[st.id]);
  if (!v) return `<p class="muted">Click a vertex for its subtasks.</p>`;
  let h = `<h2>${esc(v.name)}: subtasks</h2><table id="subtasks"><tr><th>Subtask</th><th>Worker</th><th>State</th><th class="num">In/s</th><th class="num">Out/s</th>
    <th class="num">Busy ms/s</th><th class="num">Backpressured ms/s</th><th class="num">Idle ms/s</th><th class="num">In</th><th class="num">Out</th><th class="num">Credit waits</th><th class="num">State</th><th class="num">Backlog</th><th class="num">Checkpoints</th></tr>`;
  for (const t of v.tasks || []) {
    const r = t.rates || {}, cw = creditWaits(t.stats);
    h += `<tr class="subtask"><td>${t.subtask}/${v.parallelism}</td><td>${esc(t.worker)}</td><td class="state ${esc(t.state)}">${esc(t.state)}</td>
      <td class="num">${num(r.recordsInPerSecond)}</td><td class="num">${num(r.recordsOutPerSecond)}</td><td class="num">${num(r.busyTimeMsPerSecond)}</td>
      <td class="num">${num(r.backPressuredTimeMsPerSecond)}</td><td class="num">${num(r.idleTimeMsPerSecond)}</td>
      <td class="num">${num(t.stats.recordsIn)}</td><td class="num">${num(t.stats.recordsOut)}</td>
      <td class="num credit-waits">${num(cw.n)} (${num(cw.s, 1)} s)</td><td class="num state-bytes">${bytes(t.stats.stateBytes)}</td>
      <td class="num backlog">${t.stats.backlogUnit ? (t.stats.backlogUnit === "bytes" ? bytes(t.stats.backlog) : num(t.stats.backlog)) : "–"}</td>
      <td class="num">${num(t.stats.checkpoints)}</td></tr>`;
    if (t.error) h += `<tr><td></td><td colspan="13" class="error">${esc(t.error)}</td></tr>`;
  }
  return h + "</table>";
}

function checkpointsTable(cps, base) {
  let h = `<table id="checkpoints"><tr><th class="num">ID</th><th>Status</th><th class="num">Attempt</th><th>Triggered</th><th class="num">Duration</th>
    <th class="num">State</th><th class="num">Uploaded</th><th class="num">Align ms</th><th class="num">Sync ms</th><th class="num" title="the longest step of capturing state beside processing">Step ms</th><th class="num">Async ms</th><th>Acks</th><th>Reason</th><th></th></tr>`;
  if (!cps.length) h += `<tr><td colspan="14" class="muted">No checkpoints yet</td></tr>`;
  for (const c of cps) {
    h += `<tr class="checkpoint" data-status="${esc(c.status)}" data-id="${c.id}"><td class="num">${c.id}${c.savepoint ? " (savepoint)" : ""}${c.final ? " (final)" : ""}</td>
      <td>${esc(c.status)}</td><td class="num">${c.attempt}</td><td>${esc(new Date(c.triggered).toLocaleTimeString())}</td>
      <td class="num">${c.durationSeconds ? num(c.durationSeconds, 2) + " s" : "–"}</td><td class="num">${bytes(c.stateBytes)}</td><td class="num">${bytes(c.uploadedBytes)}</td>
      <td class="num">${num(c.maxAlignMs)}</td><td class="num">${num(c.maxSyncMs)}</td><td class="num">${num(c.maxStepMs || 0)}</td><td class="num">${num(c.maxAsyncMs)}</td>
      <td>${c.acks}/${c.tasks}</td><td class="error">${esc(c.reason)}</td>
      <td><a class="explain" href="${base}/checkpoints/${c.id}">why</a></td></tr>`;
  }
  return h + "</table>";
}

function savepointsTable(sps) {
  let h = `<table id="savepoints"><tr><th>Name</th><th class="num">Checkpoint</th><th>Completed</th><th class="num">State</th><th class="num">Files</th><th>Key (weir deploy --from-savepoint)</th></tr>`;
  if (!sps.length) h += `<tr><td colspan="6" class="muted">No savepoints: weir savepoint JOB</td></tr>`;
  for (const p of sps) {
    if (p.error) {
      h += `<tr class="savepoint"><td>${esc(p.name)}</td><td colspan="5" class="error">${esc(p.key)}: ${esc(p.error)}</td></tr>`;
      continue;
    }
    h += `<tr class="savepoint"><td>${esc(p.name)}</td><td class="num">${p.checkpoint}</td><td>${esc(new Date(p.completed).toLocaleString())}</td>
      <td class="num">${bytes(p.stateBytes)}</td><td class="num">${p.files}</td><td><code>${esc(p.key)}</code></td></tr>`;
  }
  return h + "</table>";
}

function deadLettersTable(sources) {
  let h = `<table id="deadletters"><tr><th>Source</th><th class="num">Count</th><th>Origin</th><th>Reason</th><th>Record</th></tr>`;
  for (const s of sources) {
    const samples = s.samples || [];
    h += `<tr class="deadletter-source" data-source="${esc(s.source)}"><td>${esc(s.source)}</td><td class="num">${num(s.count)}</td>
      <td colspan="3" class="muted">${samples.length ? `newest ${samples.length} of the committed letters` : "none committed"}</td></tr>`;
    for (const d of samples) {
      h += `<tr class="deadletter"><td></td><td></td><td>${esc(d.origin)}</td><td class="error">${esc(d.reason)}</td><td><code>${esc(d.raw)}</code></td></tr>`;
    }
  }
  return h + "</table>";
}

function exceptionsTable(st) {
  const ex = [...(st.exceptions || [])].reverse();
  let h = `<table id="exceptions"><tr><th>Time</th><th class="num">Attempt</th><th>Error</th></tr>`;
  if (!ex.length) h += `<tr><td colspan="3" class="muted">No failures</td></tr>`;
  for (const e of ex) h += `<tr class="exception"><td>${esc(new Date(e.time).toLocaleString())}</td><td class="num">${e.attempt}</td><td class="error">${esc(e.error)}</td></tr>`;
  return h + "</table>";
}

async function explainPage(id, n, base) {
  const d = await api(`/api/v1/jobs/${encodeURIComponent(id)}/checkpoints/${encodeURIComponent(n)}`);
  let h = `<h2>Checkpoint ${d.id}</h2><p id="explanation">${esc(d.explanation)}</p>
    <table id="acks"><tr><th>Subtask</th><th>Worker</th><th class="num">Acked after</th><th class="num">Waiting</th><th class="num">Align</th>
    <th class="num">Sync</th><th class="num" title="state captured beside processing after the barrier went on">Capture</th><th class="num">Upload</th><th class="num">Uploaded</th><th>Last barrier from</th></tr>`;
  for (const s of d.subtasks || []) {
    const capture = Math.max((s.captureMs || 0) - s.syncMs, 0);
    const wait = Math.max(s.ackedMs - s.alignMs - s.syncMs - capture - s.asyncMs, 0);
    h += `<tr class="ack"><td>${esc(s.vertex)}[${s.subtask}]</td><td>${esc(s.worker)}</td><td class="num">${num(s.ackedMs)} ms</td><td class="num">${num(wait)} ms</td>
      <td class="num">${num(s.alignMs)} ms</td><td class="num">${num(s.syncMs)} ms</td><td class="num">${num(capture)} ms</td><td class="num">${num(s.asyncMs)} ms</td><td class="num">${bytes(s.uploadedBytes)}</td><td>${esc(s.lastInput || "-")}</td></tr>`;
  }
  for (const m of d.missing || []) h += `<tr class="ack missing"><td>${esc(m)}</td><td colspan="9" class="muted">not acknowledged</td></tr>`;
  return h + `</table><p><a href="${base}/checkpoints">all checkpoints</a></p>`;
}

async function job(id, tab, n) {
  const st = await api(`/api/v1/jobs/${encodeURIComponent(id)}`);
  const base = `#/jobs/${encodeURIComponent(id)}`;
  const t = st.totals || {};
  let h = `<h2>Job <span id="job-id">${esc(st.id)}</span></h2><div class="summary">
    <div><span>State</span><b class="state ${esc(st.state)}" id="job-state">${esc(st.state)}</b></div>
    <div><span>Attempt</span>${st.attempt}</div><div><span>Restarts</span>${st.restarts}</div>
    <div><span>Uptime</span>${span(st.started, st.ended)}</div>
    <div><span>Events in</span>${num(t.recordsIn)}</div><div><span>Rows to sinks</span>${num(t.sinkIn)}</div>
    <div><span>Dead letters</span>${num(t.deadLetters)}</div><div><span>Late rows</span>${num((t.lateDropped || 0) + (t.lateSide || 0))} (${num(t.lateDropped)} dropped)</div>
    <div><span>Checkpoints</span>${st.checkpoints ? `${st.checkpoints.completed} completed, ${st.checkpoints.failed} failed` : "off"}</div></div>`;
  if (st.error) h += `<p class="error">${esc(st.error)}</p>`;
  if (st.message) h += `<p class="muted">${esc(st.message)}</p>`;
  h += `<nav class="tabs"><a id="tab-graph" class="${tab ? "" : "on"}" href="${base}">Graph</a>
    <a id="tab-checkpoints" class="${tab === "checkpoints" ? "on" : ""}" href="${base}/checkpoints">Checkpoints</a>
    <a id="tab-exceptions" class="${tab === "exceptions" ? "on" : ""}" href="${base}/exceptions">Exceptions (${(st.exceptions || []).length})</a>
    <a id="tab-savepoints" class="${tab === "savepoints" ? "on" : ""}" href="${base}/savepoints">Savepoints</a>
    <a id="tab-deadletters" class="${tab === "deadletters" ? "on" : ""}" href="${base}/deadletters">Dead letters (${num(t.deadLetters)})</a></nav>`;
  if (tab === "checkpoints" && n) {
    h += await explainPage(id, n, base);
  } else if (tab === "checkpoints") {
    h += "<h2>Checkpoint history</h2>" + checkpointsTable(await api(`/api/v1/jobs/${encodeURIComponent(id)}/checkpoints`), base);
  } else if (tab === "exceptions") {
    h += "<h2>Exception history</h2>" + exceptionsTable(st);
  } else if (tab === "savepoints") {
    h += "<h2>Savepoints</h2>" + savepointsTable(await api(`/api/v1/jobs/${encodeURIComponent(id)}/savepoints`));
  } else if (tab === "deadletters") {
    h += "<h2>Dead letters</h2>" + deadLettersTable(await api(`/api/v1/jobs/${encodeURIComponent(id)}/deadletters`));
  } else {
    h += "<h2>Dataflow</h2>" + graph(st) + subtasks(st);
  }
  return h;
}

async function leader() {
  try {
    const l = await api("/api/v1/leader");
    leaderEl.textContent = l.leader ? `leader ${l.leader.id} (epoch ${l.leader.epoch}), this is ${l.self} (${l.role})` : `no leader (this is ${l.self})`;
  } catch (_) {
    leaderEl.textContent = "embedded coordinator";
  }
}

// rendering counts renders: one that a newer render (a click, the next
// second) overtook while it awaited the API must not draw its stale page
// over the newer one.
let rendering = 0;

async function render() {
  const gen = ++rendering;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  let html;
  try {
    html = parts[0] === "jobs" && parts[1] ? await job(parts[1], parts[2], parts[3]) : await overview();
  } catch (e) {
    html = `<p class="error" id="load-error">${esc(e.message)}</p>`;
  }
  if (gen !== rendering) return;
  main.innerHTML = html;
  updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
  leader();
}

main.addEventListener("click", (ev) => {
  const g = ev.target.closest("g.vertex");
  const id = document.getElementById("job-id");
  if (!g || !id) return;
  selected[id.textContent] = g.dataset.vertex;
  render();
});

function loop() {
  clearTimeout(timer);
  render().finally(() => { timer = setTimeout(loop, 1000); });
}
window.addEventListener("hashchange", loop);
loop();
