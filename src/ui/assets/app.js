// Loom's dashboard: four pages over the JSON API under /api (docs/ui.md). Plain script, no
// library; every value from the store is put into the page as text, never as markup (the
// curves are SVG the server draws and escapes).
'use strict';

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? '' : String(c)));
  return e;
}

// Loss-like metrics are better low, the others (accuracy, ...) high: which of a summary's min
// and max (MetricSummary's JSON) the runs table shows as the best (docs/ui.md, "Runs").
function lowerIsBetter(metric) {
  return ['loss', 'error', 'mse', 'mae', 'rmse', 'perplexity'].some((w) => metric.includes(w));
}

function message(text, ok) {
  const m = $('message');
  m.textContent = text;
  m.className = 'message' + (ok ? ' ok' : '') + (text ? '' : ' hidden');
}

async function api(path, options) {
  const res = await fetch(path, options);
  const type = res.headers.get('Content-Type') || '';
  const body = type.startsWith('application/json') ? await res.json() : await res.text();
  if (!res.ok) throw new Error((body && body.error) || res.statusText);
  return body;
}

async function post(path, body) {
  return api(path, {
    method: 'POST',
    headers: {'Content-Type': 'application/json', 'X-Loom-Token': $('token').value.trim()},
    body: JSON.stringify(body || {}),
  });
}

const fmt = (v) => (v == null ? '' : typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : String(v));
const when = (ms) => (ms ? new Date(ms).toLocaleString() : '');
const hp = (o) => Object.entries(o || {}).map(([k, v]) => k + '=' + (typeof v === 'string' ? v : JSON.stringify(v))).join(' ');

// ---- Runs -------------------------------------------------------------------------------
// rows per page: the choice is kept in the browser (localStorage) across visits
const runs = {offset: 0, limit: [50, 200, 1000].includes(Number(localStorage.getItem('loom-runs-limit'))) ? Number(localStorage.getItem('loom-runs-limit')) : 50, selected: new Set(), next: null, metrics: [], keys: new Set()};

async function loadRuns() {
  const q = new URLSearchParams({sort: $('runs-sort').value || 'id', order: $('runs-order').value,
                                 limit: runs.limit, offset: runs.offset});
  if ($('runs-filter').value) q.set('filter', $('runs-filter').value);
  const data = await api('/api/runs?' + q);
  runs.next = data.next_offset;
  runs.metrics = data.metrics;
  const sort = $('runs-sort'), keep = sort.value || 'id';
  sort.replaceChildren(...['id', 'name', 'experiment', 'status', 'started', ...data.metrics].map((s) => el('option', {value: s}, s)));
  sort.value = keep;
  const metric = $('plot-metric'), keepMetric = metric.value;
  metric.replaceChildren(...data.metrics.map((s) => el('option', {value: s}, s)));
  if (data.metrics.includes(keepMetric)) metric.value = keepMetric;
  else if (data.metrics.includes('loss')) metric.value = 'loss';
  $('runs-count').textContent = data.total ? `${data.offset + 1}-${data.offset + data.runs.length} of ${data.total}` : 'no runs';
  // selects or clears every run on this page at once (1,000 at most: the curves route's limit)
  const all = el('input', {type: 'checkbox', id: 'select-page', title: 'select every run on this page'});
  all.checked = data.runs.length > 0 && data.runs.every((r) => runs.selected.has(r.id));
  all.addEventListener('change', () => {
    data.runs.forEach((r) => { if (all.checked) runs.selected.add(r.id); else runs.selected.delete(r.id); });
    $('runs-table').querySelectorAll('input.select-run').forEach((b) => { b.checked = all.checked; b.closest('tr').classList.toggle('selected', all.checked); });
    drawCurves();
  });
  const head = el('tr', {}, el('th', {}, all), el('th', {}, 'id'), el('th', {}, 'name'), el('th', {}, 'experiment'),
                  el('th', {}, 'status'), el('th', {}, 'tags'), el('th', {}, 'hyper-parameters'),
                  ...data.metrics.map((m) => el('th', {title: 'final, then best and worst over epochs'}, m)));
  $('runs-table').tHead.replaceChildren(head);
  const rows = data.runs.map((r) => {
    Object.keys(r.hyper_parameters).forEach((k) => runs.keys.add(k));
    const box = el('input', {type: 'checkbox', class: 'select-run', 'data-run': r.id});
    box.checked = runs.selected.has(r.id);
    const tr = el('tr', {class: 'run' + (box.checked ? ' selected' : ''), 'data-run': r.id},
      el('td', {}, box), el('td', {class: 'num'}, r.id), el('td', {}, r.name), el('td', {}, r.experiment),
      el('td', {class: 'status-' + r.status, title: r.error}, r.status),
      el('td', {}, ...r.tags.map((t) => el('span', {class: 'badge'}, t))), el('td', {}, hp(r.hyper_parameters)),
      ...data.metrics.map((m) => {
        const s = r.summaries[m];
        const [best, worst] = lowerIsBetter(m) ? [s?.min, s?.max] : [s?.max, s?.min];
        return s ? el('td', {class: 'num'}, fmt(s.final), el('div', {class: 'sub'}, `best ${fmt(best)} · worst ${fmt(worst)}`))
                 : el('td', {}, '');
      }));
    box.addEventListener('change', () => {
      if (box.checked) runs.selected.add(r.id); else runs.selected.delete(r.id);
      tr.classList.toggle('selected', box.checked);
      drawCurves();
    });
    return tr;
  });
  $('runs-table').tBodies[0].replaceChildren(...rows);
  const group = $('group-by'), keepGroup = group.value;
  group.replaceChildren(el('option', {value: ''}, '(none)'), ...[...runs.keys].sort().map((k) => el('option', {value: k}, k)));
  group.value = keepGroup;
}

function wireLegend(box) {
  box.querySelectorAll('g.legend').forEach((g) => g.addEventListener('click', () => {
    g.classList.toggle('off');
    box.querySelectorAll(`g.series[data-series="${CSS.escape(g.dataset.series)}"]`).forEach((s) => s.classList.toggle('off'));
  }));
  box.querySelectorAll('circle.point').forEach((c) => c.addEventListener('mouseenter', () => {
    $('hover').textContent = c.querySelector('title').textContent.replace('\n', ' · ');
  }));
  // an overlay of many runs has no points: its curves carry their names
  box.querySelectorAll('path.curve').forEach((c) => {
    const title = c.querySelector('title');
    if (title) c.addEventListener('mouseenter', () => { $('hover').textContent = title.textContent; });
  });
}

async function drawSvg(box, path) {
  const svg = await api(path);
  box.innerHTML = svg;  // the server's SVG, its text escaped there
  wireLegend(box);
}

async function drawCurves() {
  const box = $('plot');
  if (!runs.selected.size) {
    box.replaceChildren(el('p', {class: 'hint'}, 'Select runs in the table to overlay their curves.'));
    return;
  }
  const q = new URLSearchParams({x: $('plot-x').value,
                                 smoothing: $('plot-smoothing').value, width: Math.max(400, Math.min(1400, box.clientWidth || 900))});
  if ($('plot-metric').value) q.set('metric', $('plot-metric').value);
  // the ids' commas as they are: 1,000 ids fit the server's 8 kB request line, %2C'd they might not
  try { await drawSvg(box, '/api/runs/curves?runs=' + [...runs.selected].join(',') + '&' + q); } catch (e) { box.replaceChildren(el('p', {class: 'hint'}, e.message)); }
}

async function compareRuns() {
  if (runs.selected.size < 2) { message('select two runs or more to compare'); return; }
  const data = await api('/api/runs/compare?' + new URLSearchParams({runs: [...runs.selected].join(','), differences: $('compare-diff').checked ? 1 : 0}));
  const head = el('tr', {}, el('th', {}, 'hyper-parameter'), ...data.runs.map((r) => el('th', {}, `${r.name} (${r.id})`)));
  const rows = data.hyper_parameters.map((p) => el('tr', {class: p.differs ? 'differs' : ''}, el('td', {}, p.key),
    ...p.values.map((v) => el('td', {}, v == null ? '—' : typeof v === 'string' ? v : JSON.stringify(v)))));
  const metrics = [...new Set(data.runs.flatMap((r) => Object.keys(r.summaries)))].sort();
  const mrows = metrics.map((m) => el('tr', {}, el('td', {}, m + ' (final)'), ...data.runs.map((r) => el('td', {class: 'num'}, r.summaries[m] ? fmt(r.summaries[m].final) : '—'))));
  $('compare').replaceChildren(el('h3', {}, 'Compare'), el('table', {class: 'grid', id: 'compare-table'}, el('thead', {}, head), el('tbody', {}, ...rows, ...mrows)),
                               rows.length ? '' : el('p', {class: 'hint'}, 'no hyper-parameter differs'));
}

async function drawGroup() {
  const by = $('group-by').value, box = $('group');
  if (!by) { box.replaceChildren(); return; }
  const q = new URLSearchParams({by, width: Math.max(400, Math.min(1400, box.clientWidth || 900))});
  if ($('plot-metric').value) q.set('metric', $('plot-metric').value);
  if ($('runs-filter').value) q.set('filter', $('runs-filter').value);
  try { await drawSvg(box, '/api/runs/group?' + q); } catch (e) { box.replaceChildren(el('p', {class: 'hint'}, e.message)); }
}

// ---- Models -----------------------------------------------------------------------------
let currentModel = null;

async function loadModels() {
  const data = await api('/api/models');
  $('models-table').tBodies[0].replaceChildren(...data.models.map((m) => el('tr', {class: 'clickable', onclick: () => showModel(m.name)},
    el('td', {}, m.name), el('td', {class: 'num'}, m.versions), el('td', {class: 'num'}, m.latest),
    el('td', {}, ...Object.entries(m.aliases).map(([a, v]) => el('span', {class: 'badge alias'}, `${a} → ${v}`))))));
  if (currentModel) await showModel(currentModel);
}

async function showModel(name) {
  currentModel = name;
  const data = await api('/api/models/' + encodeURIComponent(name));
  $('model-title').textContent = name;
  const metrics = [...new Set(data.versions.flatMap((v) => Object.keys(v.metrics)))].sort();
  $('versions-table').tHead.replaceChildren(el('tr', {}, el('th', {}, 'version'), el('th', {}, 'aliases'), el('th', {}, 'tags'),
    ...metrics.map((m) => el('th', {}, m)), el('th', {}, 'lineage'), el('th', {}, 'hyper-parameters'), el('th', {}, 'created'), el('th', {}, '')));
  $('versions-table').tBodies[0].replaceChildren(...data.versions.map((v) => el('tr', {'data-version': v.version},
    el('td', {class: 'num'}, v.version),
    el('td', {class: 'aliases'}, ...v.aliases.map((a) => el('span', {class: 'badge alias'}, a))),
    el('td', {}, ...v.tags.map((t) => el('span', {class: 'badge'}, t))),
    ...metrics.map((m) => el('td', {class: 'num'}, fmt(v.metrics[m]))),
    el('td', {}, (v.produced_by.run_id ? `run ${v.produced_by.run_id}` + (v.produced_by.run ? ` (${v.produced_by.run.name})` : '') : '') +
                 (v.produced_by.task_id ? ` task ${v.produced_by.task_id}` : '')),
    el('td', {}, hp(v.hyper_parameters)), el('td', {}, when(v.created_ms)),
    el('td', {}, el('button', {onclick: () => showArchitecture(name, v.version)}, 'architecture')))));
  $('alias-form').classList.remove('hidden');
}

async function showArchitecture(name, version) {
  const path = `/api/models/${encodeURIComponent(name)}/${version}/architecture`;
  $('architecture').textContent = await api(path);
  // the graph drawn by Graphviz when the server has it (404 otherwise: nothing shown)
  const img = el('img', {alt: 'graph of version ' + version, id: 'architecture-graph'});
  img.addEventListener('error', () => img.remove());
  img.src = path + '?format=svg';
  $('architecture-svg').replaceChildren(img);
}

async function moveAlias() {
  try {
    const r = await post(`/api/models/${encodeURIComponent(currentModel)}/aliases/${encodeURIComponent($('alias-name').value)}`,
                         {version: Number($('alias-version').value)});
    message(`${r.alias} now names version ${r.version}`, true);
    await loadModels();
  } catch (e) { message(e.message); }
}

// ---- Datasets ---------------------------------------------------------------------------
const ds = {name: null, version: null, offset: 0};

async function loadDatasets() {
  const data = await api('/api/datasets');
  $('datasets-table').tBodies[0].replaceChildren(...data.datasets.map((d) => el('tr', {class: 'clickable', onclick: () => showDataset(d.name)},
    el('td', {}, d.name), el('td', {class: 'num'}, d.versions), el('td', {class: 'num'}, d.latest))));
}

async function showDataset(name) {
  const data = await api('/api/datasets/' + encodeURIComponent(name));
  ds.name = name;
  $('dataset-title').textContent = name;
  $('dataset-versions').tBodies[0].replaceChildren(...data.versions.map((v) => el('tr', {class: 'clickable', onclick: () => { ds.version = v.version; querySamples(true); }},
    el('td', {class: 'num'}, v.version), el('td', {class: 'num'}, v.samples), el('td', {class: 'num'}, v.shards),
    el('td', {}, v.fields.map((f) => `${f.name} ${f.dtype}[${f.shape.join(',')}]`).join(', ')),
    el('td', {}, ...v.tags.map((t) => el('span', {class: 'badge'}, t))), el('td', {}, when(v.created_ms)))));
  ds.version = data.versions[data.versions.length - 1].version;
  await querySamples(true);
}

async function querySamples(fresh) {
  if (ds.name == null) return;
  if (fresh) { ds.offset = 0; $('samples').replaceChildren(); }
  const q = new URLSearchParams({limit: 24, offset: ds.offset});
  if ($('sample-query').value.trim()) q.set('query', $('sample-query').value.trim());
  try {
    const data = await api(`/api/datasets/${encodeURIComponent(ds.name)}/${ds.version}/samples?` + q);
    ds.offset += data.samples.length;
    const images = data.fields.filter((f) => f.image);
    $('samples').append(...data.samples.map((s) => el('div', {class: 'sample'},
      ...images.map((f) => el('img', {alt: f.name, src: `/api/datasets/${encodeURIComponent(ds.name)}/${ds.version}/samples/${s.index}/${encodeURIComponent(f.name)}.png`})),
      el('div', {}, `#${s.index} ` + hp(s.metadata)), el('div', {}, ...s.tags.map((t) => el('span', {class: 'badge'}, t))))));
    message('');
  } catch (e) { message(e.message); }
}

// ---- Tasks ------------------------------------------------------------------------------
const tasks = {cursor: '', timer: null};

async function pollTasks() {
  const q = new URLSearchParams({cursor: tasks.cursor});
  if ($('tasks-status').value) q.set('status', $('tasks-status').value);
  const data = await api('/api/tasks?' + q);
  $('tasks-polled').textContent = 'polled ' + new Date().toLocaleTimeString();
  if (!data.changed) return;
  tasks.cursor = data.cursor;
  $('tasks-counts').textContent = Object.entries(data.counts).map(([k, v]) => `${k} ${v}`).join(' · ');
  $('tasks-table').tBodies[0].replaceChildren(...data.tasks.map((t) => el('tr', {'data-task': t.id},
    el('td', {class: 'num'}, t.id), el('td', {}, t.kind), el('td', {}, t.name), el('td', {class: 'task-status status-' + t.status}, t.status),
    el('td', {class: 'num'}, `${t.attempts}/${t.max_attempts}`), el('td', {}, t.agent),
    el('td', {}, t.status === 'running' ? when(t.lease_expires_ms) : ''), el('td', {}, t.error),
    el('td', {}, t.status === 'pending' || t.status === 'running' ? el('button', {onclick: () => cancelTask(t.id)}, 'cancel') : ''))));
  $('agents-table').tBodies[0].replaceChildren(...data.agents.map((a) => el('tr', {},
    el('td', {}, a.name), el('td', {}, a.running.join(', ')), el('td', {class: 'num'}, a.claims), el('td', {}, when(a.lease_expires_ms)))));
}

async function cancelTask(id) {
  try { await post(`/api/tasks/${id}/cancel`); message(`task ${id} cancelled`, true); tasks.cursor = ''; await pollTasks(); } catch (e) { message(e.message); }
}

// ---- Pages ------------------------------------------------------------------------------
async function show() {
  const page = (location.hash || '#runs').slice(1);
  for (const p of ['runs', 'models', 'datasets', 'tasks']) {
    $('page-' + p).classList.toggle('hidden', p !== page);
    $('nav-' + p).classList.toggle('active', p === page);
  }
  clearInterval(tasks.timer);
  try {
    if (page === 'runs') await loadRuns();
    if (page === 'models') await loadModels();
    if (page === 'datasets') await loadDatasets();
    if (page === 'tasks') { tasks.cursor = ''; await pollTasks(); tasks.timer = setInterval(() => pollTasks().catch((e) => message(e.message)), 1000); }
  } catch (e) { message(e.message); }
}

const guard = (f) => () => f().catch((e) => message(e.message));
window.addEventListener('DOMContentLoaded', () => {
  $('token').value = sessionStorage.getItem('loom-token') || '';
  $('token').addEventListener('change', () => sessionStorage.setItem('loom-token', $('token').value.trim()));
  let typing = null;
  $('runs-filter').addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(() => { runs.offset = 0; guard(loadRuns)(); }, 250); });
  $('runs-sort').addEventListener('change', guard(loadRuns));
  $('runs-order').addEventListener('change', guard(loadRuns));
  $('runs-prev').addEventListener('click', () => { runs.offset = Math.max(0, runs.offset - runs.limit); guard(loadRuns)(); });
  $('runs-limit').value = String(runs.limit);
  $('runs-limit').addEventListener('change', () => {
    runs.limit = Number($('runs-limit').value);
    runs.offset = 0;
    localStorage.setItem('loom-runs-limit', String(runs.limit));
    guard(loadRuns)();
  });
  $('runs-next').addEventListener('click', () => { if (runs.next != null) { runs.offset = runs.next; guard(loadRuns)(); } });
  for (const id of ['plot-metric', 'plot-x']) $(id).addEventListener('change', () => { drawCurves(); drawGroup(); });
  $('plot-smoothing').addEventListener('input', () => { $('plot-smoothing-value').textContent = $('plot-smoothing').value; drawCurves(); });
  $('runs-compare').addEventListener('click', guard(compareRuns));
  $('compare-diff').addEventListener('change', () => { if ($('compare').childElementCount) guard(compareRuns)(); });
  $('group-by').addEventListener('change', guard(drawGroup));
  $('alias-move').addEventListener('click', moveAlias);
  $('sample-run').addEventListener('click', () => querySamples(true));
  $('sample-query').addEventListener('keydown', (e) => { if (e.key === 'Enter') querySamples(true); });
  $('sample-more').addEventListener('click', () => querySamples(false));
  $('tasks-status').addEventListener('change', () => { tasks.cursor = ''; guard(pollTasks)(); });
  window.addEventListener('hashchange', show);
  show();
});
