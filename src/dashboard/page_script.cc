// app.js of the dashboard: polls /api/state every second and redraws every panel with plain SVG;
// fault buttons POST /api/fault with the dashboard token (token.h; never the job's secret) from
// the input field or the URL's #token=... (the link cann-dashboard prints), kept in this tab's
// sessionStorage and sent in the X-CDT-Token header only.
#include "dashboard/page.h"

namespace cdt::dashboard {

const char kAppJs[] = R"JS('use strict';
const NS = 'http://www.w3.org/2000/svg';
const $ = (id) => document.getElementById(id);
const panels = JSON.parse(document.body.dataset.panels || '{}');
for (const [name, on] of Object.entries(panels)) {
  const el = $('panel-' + name);
  if (el && on === false) el.classList.add('off');
}
if (location.hash.startsWith('#token=')) {
  sessionStorage.setItem('cdt-token', decodeURIComponent(location.hash.slice(7)));
  history.replaceState(null, '', location.pathname);
}
$('token').value = sessionStorage.getItem('cdt-token') || '';
$('token').addEventListener('change', () => sessionStorage.setItem('cdt-token', $('token').value));
if (panels.faults_remote_off) {
  $('fault-result').textContent = 'fault actions are off: this dashboard listens beyond loopback (restart it with --allow-remote-faults to allow them)';
}

function el(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  return Number(v).toLocaleString('en-US', {maximumFractionDigits: digits === undefined ? 2 : digits});
}
function bytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return fmt(n, 1) + ' ' + u[i];
}
function rows(table, data, cls) {
  const body = table.tBodies[0];
  body.textContent = '';
  data.forEach((cells, i) => {
    const tr = body.insertRow();
    if (cls && cls[i]) tr.className = cls[i];
    for (const c of cells) {
      const td = tr.insertCell();
      if (c instanceof Node) td.appendChild(c); else td.textContent = c;
    }
  });
}

// A line chart of [x, y] points (several series), axes labelled with the extremes.
function lineChart(svg, series, opts) {
  clear(svg);
  const [W, H] = svg.getAttribute('viewBox').split(' ').slice(2).map(Number);
  const L = 44, R = 8, T = 8, B = 20;
  const pts = series.flatMap((s) => s.points);
  if (!pts.length) { svg.appendChild(el('text', {x: W / 2 - 30, y: H / 2}, 'no data yet')); return; }
  let x0 = Math.min(...pts.map((p) => p[0])), x1 = Math.max(...pts.map((p) => p[0]));
  let y0 = opts && opts.zero ? 0 : Math.min(...pts.map((p) => p[1])), y1 = Math.max(...pts.map((p) => p[1]));
  if (opts && opts.marker !== undefined) { x0 = Math.min(x0, opts.marker); x1 = Math.max(x1, opts.marker); }
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  svg.appendChild(el('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#99a'}));
  svg.appendChild(el('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#99a'}));
  svg.appendChild(el('text', {x: 2, y: T + 8}, fmt(y1, 3)));
  svg.appendChild(el('text', {x: 2, y: H - B}, fmt(y0, 3)));
  const xl = opts && opts.xlabel ? opts.xlabel : (v) => fmt(v, 0);
  svg.appendChild(el('text', {x: L, y: H - 4}, xl(x0)));
  svg.appendChild(el('text', {x: W - R - 60, y: H - 4}, xl(x1)));
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => (i ? 'L' : 'M') + sx(p[0]).toFixed(1) + ',' + sy(p[1]).toFixed(1)).join('');
    svg.appendChild(el('path', {d, fill: 'none', stroke: s.color || '#2862c9', 'stroke-width': 1.5, class: 'series'}));
  }
  if (opts && opts.marker !== undefined)
    svg.appendChild(el('line', {x1: sx(opts.marker), y1: T, x2: sx(opts.marker), y2: H - B, stroke: '#d33', 'stroke-dasharray': '3,2', id: svg.id + '-now'}));
}

const PARTS = [['forward_s', '#2862c9', 'forward'], ['backward_s', '#6b9be8', 'backward'],
               ['comm_wait_s', '#e0792b', 'exposed comm'], ['optimizer_s', '#4caf50', 'optimizer']];

function drawTraining(s) {
  const r0 = s.rank0;
  $('job').textContent = s.job;
  if (!r0) return;
  $('train-step').textContent = (r0.step + 1) + ' / ' + r0.end_step + (r0.finished ? ' (finished)' : '');
  $('train-world').textContent = r0.world;
  $('train-generation').textContent = r0.generation;
  $('train-sps').textContent = fmt(r0.samples_per_s, 1);
  $('train-loss').textContent = fmt(r0.loss, 4);
  $('train-acc').textContent = r0.test_accuracy >= 0 ? fmt(100 * r0.test_accuracy, 2) + ' %' : 'not yet';
  const g = r0.gradients, ph = g.phases.length ? g.phases[g.phases.length - 1] : null;
  $('train-compress').textContent = g.compress + (ph ? ' · ' + ph[1] + ' ' + ph[2] : '') +
      (g.bytes_wire > 0 ? ' · ×' + fmt(g.bytes_fp32 / g.bytes_wire, 1) : '');
  $('train-phases').textContent = g.phases.length ? 'compression over time: ' + g.phases.map((p) =>
      'step ' + p[0] + ' ' + p[1] + ' ' + p[2] + (p[3] ? ' (' + fmt(p[3], 3) + ')' : '')).join(' → ') +
      ' · residual ' + fmt(g.residual_pct, 2) + ' % · ' + bytes(g.bytes_fp32) + ' of gradients sent as ' + bytes(g.bytes_wire) : '';
  lineChart($('chart-loss'), [{points: r0.loss_curve}]);
  lineChart($('chart-sps'), [{points: s.history.map((h) => [h[0] - s.now, h[1]])}],
            {zero: true, xlabel: (v) => fmt(v, 0) + ' s'});
  // Step-time breakdown: one stacked bar per current rank, ms per step.
  const svg = $('chart-breakdown');
  clear(svg);
  const ws = s.workers.filter((w) => w.current).sort((a, b) => a.rank - b.rank);
  const per = ws.map((w) => PARTS.map(([k]) => w.steps > 0 ? 1000 * w.step_time[k] / w.steps : 0));
  const top = Math.max(1e-9, ...per.map((p) => p.reduce((a, b) => a + b, 0)));
  const bw = Math.min(60, 340 / Math.max(1, ws.length));
  ws.forEach((w, i) => {
    let y = 140;
    per[i].forEach((v, k) => {
      const h = v / top * 120;
      svg.appendChild(el('rect', {x: 50 + i * (bw + 6), y: y - h, width: bw, height: h, fill: PARTS[k][1],
                                  class: 'bar', 'data-rank': w.rank, 'data-part': PARTS[k][2]}));
      y -= h;
    });
    svg.appendChild(el('text', {x: 50 + i * (bw + 6), y: 154}, 'rank ' + w.rank + (w.rank === s.slowest_rank ? ' ◀' : '')));
  });
  svg.appendChild(el('text', {x: 2, y: 22}, fmt(top, 1) + ' ms'));
  PARTS.forEach(([, c, name], k) => {
    svg.appendChild(el('rect', {x: 330, y: 10 + k * 14, width: 9, height: 9, fill: c}));
    svg.appendChild(el('text', {x: 343, y: 18 + k * 14}, name));
  });
}

const LEVEL_COLOR = {shm: '#4caf50', intra: '#2862c9', inter: '#e0792b'};

function drawTopology(s) {
  const r0 = s.rank0, svg = $('topo-graph');
  clear(svg);
  if (!r0 || !r0.topology) { svg.appendChild(el('text', {x: 240, y: 110}, 'waiting for rank 0')); return; }
  const t = r0.topology, nodes = [];
  t.node_of_rank.forEach((n, r) => { (nodes[n] = nodes[n] || []).push(r); });
  const pos = {};
  const nw = 600 / Math.max(1, nodes.length);
  nodes.forEach((ranks, n) => {
    const x = 20 + n * nw;
    svg.appendChild(el('rect', {x, y: 30, width: nw - 20, height: 150, rx: 8, fill: '#eef2fa', stroke: '#9ab', class: 'node', 'data-node': n}));
    svg.appendChild(el('text', {x: x + 8, y: 46}, 'node ' + n + (t.shares_memory && ranks.length > 1 ? ' · shared memory' : '')));
    ranks.forEach((r, i) => {
      const cx = x + 30 + (i % 4) * ((nw - 60) / 4), cy = 90 + Math.floor(i / 4) * 50;
      pos[r] = [cx, cy];
    });
  });
  // Links: the network transport's bytes between each pair (both directions, rank 0's view of
  // every rank's counters), coloured by level.
  const sent = {};
  for (const w of s.workers.filter((w) => w.current)) sent[w.rank] = w.comm.sent_bytes;
  let most = 1;
  for (const a in sent) for (let b = 0; b < sent[a].length; b++) most = Math.max(most, sent[a][b] || 0);
  for (const a in sent) for (let b = Number(a) + 1; b < sent[a].length; b++) {
    if (!pos[a] || !pos[b]) continue;
    const v = (sent[a][b] || 0) + ((sent[b] || [])[a] || 0);
    const level = t.node_of_rank[a] !== t.node_of_rank[b] ? 'inter' : (t.shares_memory ? 'shm' : 'intra');
    svg.appendChild(el('line', {x1: pos[a][0], y1: pos[a][1], x2: pos[b][0], y2: pos[b][1], stroke: LEVEL_COLOR[level],
                                'stroke-width': 0.5 + 5 * v / most, opacity: 0.7, class: 'link', 'data-level': level,
                                'data-a': a, 'data-b': b, 'data-bytes': v}));
  }
  for (const [r, [cx, cy]] of Object.entries(pos)) {
    const slow = Number(r) === s.slowest_rank;
    svg.appendChild(el('circle', {cx, cy, r: 14, fill: slow ? '#ffcf66' : '#fff', stroke: '#1d2330', class: 'rank', 'data-rank': r}));
    svg.appendChild(el('text', {x: cx - 4, y: cy + 4}, r));
  }
  svg.appendChild(el('text', {x: 20, y: 200}, 'link width: bytes over the network transport; colour: green shared memory, blue same node,'));
  svg.appendChild(el('text', {x: 20, y: 213}, 'orange between nodes; yellow: the slowest rank (compute per step)'));
  rows($('topo-algos'), t.algorithm_by_size.map((a) => [bytes(a.bytes), a.algorithm]));
  const m = s.topology_measured;
  if (m && m.levels) {
    rows($('topo-levels'), m.levels.map((l) => [l.name, fmt(l.alpha_us, 1), fmt(l.beta_GBps, 3), fmt(l.node_GBps, 3)]));
    $('topo-source').textContent = 'levels measured by topo-scan for this shape: ' + s.topology_source;
  } else {
    rows($('topo-levels'), []);
    $('topo-source').textContent = s.topology_source ||
        'no measurement of this cluster shape yet: run cann-dist-train topo-scan with the same ranks per node';
  }
}

function drawComm(s) {
  const ws = s.workers.filter((w) => w.current).sort((a, b) => a.rank - b.rank);
  const svg = $('comm-matrix');
  clear(svg);
  const n = ws.length ? ws[0].world : 0;
  let most = 1, busiest = null;
  for (const w of ws) w.comm.sent_bytes.forEach((v, p) => { if (v > most) { most = v; busiest = [w.rank, p, v]; } });
  const c = Math.min(40, 200 / Math.max(1, n));
  for (const w of ws) w.comm.sent_bytes.forEach((v, p) => {
    const a = v / most;
    svg.appendChild(el('rect', {x: 40 + p * c, y: 20 + w.rank * c, width: c - 1, height: c - 1,
                                fill: 'rgba(40,98,201,' + (0.05 + 0.95 * a).toFixed(3) + ')', class: 'cell',
                                'data-from': w.rank, 'data-to': p, 'data-bytes': v}));
  });
  for (let i = 0; i < n; i++) {
    svg.appendChild(el('text', {x: 40 + i * c + c / 3, y: 14}, i));
    svg.appendChild(el('text', {x: 24, y: 20 + i * c + c / 2 + 3}, i));
  }
  const r0 = s.rank0;
  const bsvg = $('comm-buckets');
  clear(bsvg);
  if (r0) {
    const bc = r0.gradients.bucket_comm_s, bw = r0.gradients.bucket_wait_s;
    const top = Math.max(1e-9, ...bc, ...bw);
    const w = Math.min(40, 360 / Math.max(1, bc.length));
    bc.forEach((v, i) => {
      const h1 = v / top * 160, h2 = (bw[i] || 0) / top * 160;
      bsvg.appendChild(el('rect', {x: 40 + i * (w + 4), y: 180 - h1, width: w / 2, height: h1, fill: '#2862c9', class: 'bucket-comm'}));
      bsvg.appendChild(el('rect', {x: 40 + i * (w + 4) + w / 2, y: 180 - h2, width: w / 2, height: h2, fill: '#e0792b', class: 'bucket-wait'}));
      bsvg.appendChild(el('text', {x: 40 + i * (w + 4), y: 194}, 'b' + i));
    });
    bsvg.appendChild(el('text', {x: 2, y: 14}, fmt(top, 2) + ' s'));
    bsvg.appendChild(el('text', {x: 250, y: 14}, 'blue: on the communicator · orange: exposed'));
  }
  const algos = {};
  for (const w of ws) for (const a of w.comm.allreduce) {
    const x = algos[a.name] = algos[a.name] || {ops: 0, bytes: 0, seconds: 0};
    x.ops += a.ops; x.bytes += a.bytes; x.seconds += a.seconds;
  }
  rows($('comm-algos'), Object.entries(algos).map(([k, a]) =>
      [k, fmt(a.ops, 0), bytes(a.bytes), fmt(a.seconds, 2), fmt(a.seconds > 0 ? a.bytes / a.seconds / 1e9 : 0, 3)]));
  const parts = [];
  if (r0) parts.push('overlap ' + fmt(100 * r0.gradients.overlap_ratio, 1) + ' % of gradient communication hidden behind compute (rank 0)');
  if (busiest) parts.push('busiest link: rank ' + busiest[0] + ' → ' + busiest[1] + ', ' + bytes(busiest[2]));
  if (s.slowest_rank >= 0) parts.push('slowest rank (compute per step): ' + s.slowest_rank);
  $('comm-summary').textContent = parts.join(' · ');
}

function drawCarbon(s) {
  const c = s.carbon;
  if (!c) { $('carbon-source').textContent = 'no carbon trace (give --trace FILE)'; return; }
  $('carbon-now').textContent = fmt(c.now_g_per_kwh, 0);
  $('carbon-energy').textContent = fmt(c.energy_j / 1000, 2);
  $('carbon-grams').textContent = fmt(c.carbon_g, 3);
  $('carbon-budget').textContent = c.budget_g > 0 ? fmt(c.budget_g, 1) + ' (' + fmt(100 * c.carbon_g / c.budget_g, 1) + ' % used)' : 'none';
  lineChart($('carbon-chart'), [{points: c.hours.map((h) => [(h[0] - s.now) / 3600, h[1]]), color: '#4caf50'}],
            {marker: 0, xlabel: (v) => fmt(v, 0) + ' h'});
  $('carbon-source').textContent = 'trace: ' + c.source + ' · carbon = energy × PUE ' + fmt(c.pue, 2) +
      ' × the hour\'s intensity, integrated as the job reports its energy' +
      (c.energy_j > 0 ? '' : ' · this job meters no energy (train with --energy-windows)');
}

async function fault(kind, rank, value) {
  const res = await fetch('/api/fault', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CDT-Token': $('token').value},
                                        body: JSON.stringify({kind, rank, value})});
  const body = await res.json().catch(() => ({}));
  $('fault-result').textContent = res.ok ? 'queued ' + body.queued + ' (the workers look every ten steps)' : 'refused: ' + (body.error || res.status);
  $('fault-result').dataset.status = res.status;
}

function drawFaults(s) {
  const ws = [...s.workers].sort((a, b) => a.worker_id - b.worker_id);
  rows($('fault-ranks'), ws.map((w) => {
    const span = document.createElement('span');
    for (const [kind, label, value] of [['kill', 'kill', 0], ['hang', 'hang', 0], ['slow', 'slow ×3', 3], ['cut', 'cut 5 s', 5]]) {
      const b = document.createElement('button');
      b.textContent = label + ' ' + w.worker_id;
      b.className = kind;
      b.dataset.kind = kind;
      b.dataset.rank = w.worker_id;
      b.addEventListener('click', () => fault(kind, w.worker_id, value));
      span.appendChild(b);
    }
    const state = w.finished ? 'finished' : (!w.current || w.age_s > 10 ? 'gone (' + fmt(w.age_s, 0) + ' s silent)' : 'training');
    return [w.worker_id, w.rank, w.step + 1, state, span];
  }), ws.map((w) => (!w.finished && (!w.current || w.age_s > 10)) ? 'gone' : ''));
  const rec = s.rank0 ? s.rank0.recoveries : [];
  rows($('recoveries'), rec.map((r) => [r.generation, r.cause, r.lost_workers.join(','), fmt(r.detected_after_s, 3), fmt(r.rto_s, 3),
                                        r.lost_steps, r.world_before + ' → ' + r.world_after]));
  rows($('events'), s.events.slice(-8).reverse().map((e) => [new Date(e.unix_time * 1000).toLocaleTimeString(),
                                                             e.kind === 'fault' ? 'queued ' + e.spec : 'refused: ' + e.why]));
}

async function tick() {
  try {
    const res = await fetch('/api/state', {cache: 'no-store'});
    const s = await res.json();
    const age = s.rank0 ? s.now - s.rank0.unix_time : null;
    $('status').textContent = s.store_error ? 'store: ' + s.store_error :
        (s.rank0 ? (s.rank0.finished ? 'job finished' : 'live · rank 0 reported ' + fmt(age, 1) + ' s ago') : 'waiting for the job') +
        ' · ' + s.store;
    $('status').classList.toggle('stale', !!s.store_error || (age !== null && age > 10 && !s.rank0.finished));
    drawTraining(s);
    drawTopology(s);
    drawComm(s);
    drawCarbon(s);
    drawFaults(s);
    document.body.dataset.updated = String(s.now);
  } catch (e) {
    $('status').textContent = 'dashboard unreachable: ' + e;
    $('status').classList.add('stale');
  }
}
tick();
setInterval(tick, 1000);
)JS";

}  // namespace cdt::dashboard
