// One job: its definition, the next 10 fires (/cron/preview), a timeline of the last runs and
// the recent runs with their output; Edit and Delete for jobs defined through the API (a job
// from a config file says why it has neither). Refreshes while open.
import { api, enc } from '../api.js';
import { timeline } from '../chart.js';
import { createRunsTable } from '../runs_table.js';
import {
  clear, firesList, formatInstant, h, mono, notice, outcomeBadge, relative, toast,
} from '../ui.js';
import { deleteControl } from '../job_form.js';
import { readOnlyNotice } from './job_edit.js';
import { triggerButton } from './jobs.js';

// An RFC 3339 instant moved by `ms` milliseconds.
function shiftMs(iso, ms) {
  return new Date(Date.parse(iso) + ms).toISOString();
}

function executorText(spec) {
  if (spec.http) return `${spec.http.method || 'GET'} ${spec.http.url}`;
  if (spec.argv && spec.argv.length) return JSON.stringify(spec.argv);
  return spec.command || '(in-process handler)';
}

const WINDOW_TEXT = { not_started: 'not started', open: 'open', ended: 'ended' };

// The active window (start_at, end_at, max_runs) and where the job is in it; null without one.
function windowRow(job) {
  const spec = job.spec || {};
  if (!spec.start_at && !spec.end_at && !spec.max_runs) return null;
  const parts = [];
  if (spec.start_at) parts.push(`from ${formatInstant(spec.start_at, job.timezone)}`);
  if (spec.end_at) parts.push(`until ${formatInstant(spec.end_at, job.timezone)}`);
  if (spec.max_runs) parts.push(`at most ${spec.max_runs} fires`);
  return ['Window', h('span', {},
    h('span', { class: `badge window-${job.window}`, id: 'job-window' }, WINDOW_TEXT[job.window] || job.window),
    ' ', parts.join(', '))];
}

const CHILD_KEYS = [['on_success', 'on success'], ['on_failure', 'on failure'], ['on_complete', 'when done']];

const jobLink = (id) => h('a', { class: 'chip mono', href: `#/jobs/${enc(id)}` }, id);

// The job's place in its chain: the jobs that fire it (parents, and the jobs it joins), the job,
// and the jobs it fires (with the outcome each waits for, and the joins that list it); null when
// it has neither. One level each way: each job's page goes on.
function chain(job) {
  const spec = job.spec || {};
  const parents = job.parents || [];
  const children = CHILD_KEYS.flatMap(([key, when]) => (spec[key] || []).map((id) => [id, when]))
    .concat((job.joins || []).map((id) => [id, 'joins it']));
  if (!parents.length && !children.length) return null;
  const column = (label, items) => h('div', { class: 'chain-col' },
    h('div', { class: 'chain-label' }, label), items.length ? items : h('span', { class: 'muted' }, 'none'));
  return ['Chain', h('div', {
    class: 'chain', id: 'job-chain', role: 'group',
    'aria-label': `${parents.length} jobs fire ${job.id}; it fires ${children.length}`,
  },
  column('Fired by', parents.map((id) => jobLink(id))),
  h('span', { class: 'chain-arrow', 'aria-hidden': 'true' }, '→'),
  column('This job', [h('span', { class: 'chip mono chip-self' }, job.id)]),
  h('span', { class: 'chain-arrow', 'aria-hidden': 'true' }, '→'),
  column('Fires', children.map(([id, when]) => h('span', { class: 'chain-child' }, jobLink(id), ` ${when}`))))];
}

function definition(job) {
  const spec = job.spec || {};
  const rows = [
    spec.schedule ? ['Schedule', h('div', {}, mono(spec.schedule), h('div', { class: 'reading' }, job.schedule_description))] : null,
    ['Time zone', job.timezone],
    spec.schedule ? null : ['Schedule', 'none: it fires as a child, by a trigger or by a backfill'],
    windowRow(job),
    chain(job),
    spec.after && spec.after.length ? ['Joins', `runs once ${spec.after.join(', ')} succeeded for the same instant${
      spec.join_timeout ? `; skipped after ${spec.join_timeout} without them` : ''}`] : null,
    (spec.exclude && spec.exclude.length) || (spec.calendars && spec.calendars.length)
      ? ['Excludes', h('div', { class: 'chips' },
        (spec.exclude || []).map((e) => h('code', { class: 'chip mono' }, e)),
        (spec.calendars || []).map((c) => h('span', { class: 'chip' }, `calendar ${c}`)))] : null,
    spec.jitter && spec.jitter !== '0s' ? ['Jitter', `up to ${spec.jitter} after each instant (the same on every node)`] : null,
    [job.executor === 'http' ? 'HTTP' : 'Command', mono(executorText(spec), { class: 'wrap' })],
    spec.description ? ['Description', spec.description] : null,
    ['Timeout', spec.timeout === '0s' ? 'none' : spec.timeout],
    ['Retries', spec.retries ? `${spec.retries} (backoff ${spec.retry_backoff})` : 'none'],
    ['Overlap', spec.overlap],
    ['Misfire', `${spec.misfire} within ${spec.catchup_window}`],
    ['Lost runs', spec.on_lost],
    spec.shards > 1 ? ['Shards', spec.shards] : null,
    ['Breaker', spec.max_consecutive_failures ? `pause after ${spec.max_consecutive_failures} failures` : 'off'],
    ['History', `last ${spec.history_keep}, at most ${spec.history_max_age}`],
    spec.env && Object.keys(spec.env).length ? ['Environment', mono(Object.keys(spec.env).join(', '))] : null,
    spec.params && Object.keys(spec.params).length
      ? ['Parameters', mono(JSON.stringify(spec.params), { class: 'wrap' })] : null,
    ['Source', job.read_only ? `config file (${job.source})` : `API, version ${job.version}`],
  ].filter(Boolean);
  return h('dl', { class: 'definition' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// "Trigger with parameters": a JSON object merged over the job's default params for one fire.
// A problem (not JSON, not an object, or the API's 400) is shown next to the field.
function paramsForm(id, onDone) {
  const field = h('textarea', {
    id: 'trigger-params', class: 'input mono params-input', rows: '4', spellcheck: 'false',
    'aria-describedby': 'trigger-params-help trigger-params-error',
  }, '{}');
  const error = h('p', { id: 'trigger-params-error', class: 'field-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Trigger with these parameters');
  const fail = (message) => {
    field.setAttribute('aria-invalid', 'true');
    error.textContent = message;
    field.focus();
  };
  const form = h('form', {
    class: 'params-form', 'aria-labelledby': 'params-title',
    onsubmit: async (ev) => {
      ev.preventDefault();
      let params;
      try {
        params = JSON.parse(field.value.trim() || '{}');
      } catch (e) {
        fail(`params: not valid JSON (${e.message})`);
        return;
      }
      if (params === null || typeof params !== 'object' || Array.isArray(params)) {
        fail('params: must be a JSON object, e.g. {"month": "2026-11"}');
        return;
      }
      field.removeAttribute('aria-invalid');
      error.textContent = '';
      submit.disabled = true;
      try {
        const { run_id: runId } = await api(`/jobs/${enc(id)}/trigger`, { method: 'POST', body: { params } });
        toast(`Triggered ${runId}`, 'success');
        onDone(runId);
      } catch (e) {
        if (e.status === 400) fail(e.message);
        else if (e.status !== 401) toast(e.message, 'error');
      } finally {
        submit.disabled = false;
      }
    },
  },
  h('h2', { id: 'params-title' }, 'Trigger with parameters'),
  h('label', { for: 'trigger-params', class: 'label' }, 'Parameters (JSON object)'),
  field,
  h('p', { class: 'hint', id: 'trigger-params-help' },
    'Merged over the job\'s default parameters for this fire; the run sees them as ',
    h('code', {}, 'GNOMON_PARAMS'), ' (HTTP jobs: in the body). At most 16 KiB.'),
  error,
  h('div', { class: 'form-actions' }, submit));
  return { form, prefill: (params) => {
    if (!field.dataset.touched) field.value = JSON.stringify(params || {}, null, 2);
  }, field };
}

// "Backfill": the fires of a past window that have no record run, at most N at a time. The
// window is typed as RFC 3339 instants (UTC by default); the API's 400 is shown under the form.
function backfillForm(id, onDone) {
  const hour = 3600 * 1000;
  const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const now = Math.floor(Date.now() / hour) * hour;
  const from = h('input', { id: 'backfill-from', class: 'input mono', type: 'text', value: iso(now - 24 * hour) });
  const to = h('input', { id: 'backfill-to', class: 'input mono', type: 'text', value: iso(now) });
  const lanes = h('input', { id: 'backfill-max', class: 'input', type: 'number', min: '1', max: '16', value: '1' });
  const result = h('p', { id: 'backfill-result', class: 'field-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'btn' }, 'Backfill this window');
  return h('form', {
    class: 'params-form', 'aria-labelledby': 'backfill-title',
    onsubmit: async (ev) => {
      ev.preventDefault();
      submit.disabled = true;
      result.classList.add('field-error');
      try {
        const plan = await api(`/jobs/${enc(id)}/backfill`, {
          method: 'POST',
          body: { from: from.value.trim(), to: to.value.trim(), max_concurrent: Number(lanes.value) },
        });
        result.classList.remove('field-error');
        result.textContent = `${plan.fires} fires in the window, ${plan.recorded} already recorded, `
          + `${plan.run_ids.length} started.`;
        onDone();
      } catch (e) {
        if (e.status !== 401) result.textContent = e.message;
      } finally {
        submit.disabled = false;
      }
    },
  },
  h('h2', { id: 'backfill-title' }, 'Backfill'),
  h('p', { class: 'hint' }, 'Runs the fires of a past window that have no record, oldest first.'),
  h('div', { class: 'field field-row backfill-row' },
    h('div', {}, h('label', { for: 'backfill-from', class: 'label' }, 'From'), from),
    h('div', {}, h('label', { for: 'backfill-to', class: 'label' }, 'To (excluded)'), to),
    h('div', {}, h('label', { for: 'backfill-max', class: 'label' }, 'At once'), lanes)),
  result,
  h('div', { class: 'form-actions' }, submit));
}

export async function render(root, ctx) {
  const [id] = ctx.params;
  ctx.setTitle(id);
  const head = h('div');
  const defBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const firesBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const chartBox = h('div', { class: 'chart-box' });
  const runsStatus = h('div');
  const table = createRunsTable({ label: `Recent runs of ${id}`, onChange: () => refreshRuns() });
  const params = paramsForm(id, () => refreshRuns());
  params.field.addEventListener('input', () => { params.field.dataset.touched = '1'; });
  let job = null;
  let etag = '';
  let drawn = '';
  const nextFire = h('span', { class: 'muted small' });
  const del = deleteControl(id, () => etag);

  // Drawn again only when what it shows changes, so the focus stays on its buttons meanwhile.
  function header() {
    nextFire.textContent = !job.paused && job.next_fire ? `next fire ${relative(job.next_fire)}` : '';
    const shape = JSON.stringify([job.paused, job.running > 0, job.pause_reason, job.read_only, job.spec.schedule, job.timezone]);
    if (shape === drawn) return;
    drawn = shape;
    const pause = h('button', {
      type: 'button', class: 'btn', 'aria-label': job.paused ? `Resume ${id}` : `Pause ${id}`,
      onclick: async () => {
        pause.disabled = true;
        try {
          await api(`/jobs/${enc(id)}/${job.paused ? 'resume' : 'pause'}`, { method: 'POST' });
          toast(`${id} ${job.paused ? 'resumed' : 'paused'}`, 'success');
          await refreshJob();
        } catch (e) {
          toast(e.message, 'error');
        } finally {
          pause.disabled = false;
        }
      },
    }, job.paused ? 'Resume' : 'Pause');
    clear(head, h('div', { class: 'page-header' },
      h('div', {},
        h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / '),
        h('h1', { class: 'mono job-title' }, id),
        h('div', { class: 'state-line' },
          job.paused ? h('span', { class: 'badge state-paused' }, 'paused')
            : h('span', { class: 'badge state-active' }, 'active'),
          job.running > 0 ? outcomeBadge('running') : null,
          job.pause_reason ? h('span', { class: 'muted small' }, job.pause_reason) : null,
          job.read_only ? h('span', { class: 'tag' }, 'read-only: config file') : null,
          nextFire)),
      h('div', { class: 'actions' },
        triggerButton(id, { label: 'Trigger now', className: 'btn btn-primary', onDone: () => refreshRuns() }),
        pause,
        job.read_only ? null : h('a', { class: 'btn', href: `#/jobs/${enc(id)}/edit`, 'aria-label': `Edit ${id}` }, 'Edit'),
        job.read_only ? null : del.button,
        h('a', {
          class: 'btn btn-ghost',
          href: `#/playground?expr=${enc(job.spec.schedule)}&tz=${enc(job.timezone)}`,
        }, 'Open in playground'))),
    job.read_only ? readOnlyNotice(job) : null);
  }

  async function refreshJob() {
    const answer = await api(`/jobs/${enc(id)}`, { withEtag: true });
    job = answer.data;
    etag = answer.etag;
    header();
    clear(defBox, definition(job));
    params.prefill(job.spec.params);
  }

  async function refreshFires() {
    if (!job.spec.schedule) {
      clear(firesBox, notice('info', 'No schedule: the job fires when a job of its chain ends, by a trigger or by a backfill.'));
      return;
    }
    try {
      const preview = await api('/cron/preview', {
        query: {
          expr: job.spec.schedule, tz: job.timezone, n: 10, job: id,
          // The window's first fire when it has not started: the preview starts there.
          from: job.window === 'not_started' && job.next_fire ? shiftMs(job.next_fire, -1) : undefined,
          exclude: (job.spec.exclude || []).join(';') || undefined,
          calendars: (job.spec.calendars || []).join(',') || undefined,
        },
      });
      // The window's end cuts the list (the preview knows the schedule and exclusions only).
      const last = job.last_fire ? Date.parse(job.last_fire) : Infinity;
      const next = preview.next.filter((t) => Date.parse(t) <= last);
      const excluded = preview.excluded.filter((t) => Date.parse(t) <= last);
      clear(firesBox, job.window === 'ended'
        ? notice('info', 'The job\'s window has ended: it fires no more.')
        : next.length || excluded.length
          ? firesList(next, excluded, job.timezone, `Next ${next.length} fires of ${id}`, { utc: true })
          : notice('info', 'This schedule never fires (within 100 years).'));
    } catch (e) {
      if (e.status !== 401) clear(firesBox, notice('error', e.message));
    }
  }

  async function refreshRuns() {
    try {
      const { runs } = await api('/runs', { query: { job: id, limit: 50 } });
      runsStatus.replaceChildren();
      clear(chartBox, timeline(runs));
      table.update(runs, 'No runs yet. Trigger the job to see one here.');
    } catch (e) {
      if (e.status !== 401) runsStatus.replaceChildren(notice('error', e.message));
    }
  }

  root.append(head, del.panel,
    h('div', { class: 'grid-2' },
      h('section', { class: 'card', 'aria-labelledby': 'def-title' },
        h('h2', { id: 'def-title' }, 'Definition'), defBox),
      h('section', { class: 'card', 'aria-labelledby': 'fires-title' },
        h('h2', { id: 'fires-title' }, 'Next 10 fires'), firesBox)),
    h('div', { class: 'grid-2 section' },
      h('section', { class: 'card' }, params.form),
      h('section', { class: 'card' }, backfillForm(id, () => refreshRuns()))),
    h('section', { class: 'section', 'aria-labelledby': 'runs-title' },
      h('div', { class: 'section-head' }, h('h2', { id: 'runs-title' }, 'Recent runs'),
        h('a', { href: `#/runs?job=${enc(id)}`, class: 'small' }, 'All runs of this job')),
      h('div', { class: 'card' }, chartBox),
      runsStatus,
      table.element));

  try {
    await refreshJob();
  } catch (e) {
    if (e.status === 404) {
      clear(root, notice('warn', `No job "${id}". `, h('a', { href: '#/jobs' }, 'Back to jobs')));
      return;
    }
    throw e;
  }
  await Promise.all([refreshFires(), refreshRuns()]);
  ctx.every(2000, async () => {
    try {
      await refreshJob();
    } catch (e) {
      if (e.status === 404) location.hash = '#/jobs';
      return;
    }
    await refreshRuns();
  });
  ctx.every(10000, refreshFires);
}
