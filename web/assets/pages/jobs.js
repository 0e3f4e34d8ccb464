// Jobs: every job with its schedule and reading, zone, next fire, last outcome, a paused switch
// and a trigger button; a filter box narrows the loaded list as you type. The API pages the list
// by id (GET /jobs?limit=&cursor=): the first PAGE jobs load, "Load more" follows next_cursor,
// and the periodic refresh reloads as many jobs as are shown.
import { api, enc } from '../api.js';
import {
  clear, emptyRow, formatDuration, h, jobLink, mono, notice, outcomeBadge, pageHeader, relative,
  runDuration, timeCell, toast,
} from '../ui.js';

// The newest run of each job, from one page of recent runs (the list has no per-job last run).
async function lastRuns() {
  try {
    const { runs } = await api('/runs', { query: { limit: 500 } });
    const last = new Map();
    for (const run of runs) if (!last.has(run.job_id)) last.set(run.job_id, run);
    return last;
  } catch (e) {
    if (e.status === 401) throw e;
    return new Map(); // optional decoration
  }
}

// Jobs per request of the list (the API's maximum is 1000).
const PAGE = 200;

// At least `want` jobs from the start of the list (all when fewer), following the cursor.
async function loadJobs(want) {
  let jobs = [];
  let cursor = '';
  do {
    const page = await api('/jobs', { query: { limit: Math.min(1000, want - jobs.length), cursor } });
    jobs = jobs.concat(page.jobs);
    cursor = page.next_cursor;
  } while (cursor && jobs.length < want);
  return { jobs, cursor };
}

function pausedToggle(job, refresh) {
  const input = h('input', {
    type: 'checkbox', role: 'switch', checked: job.paused, 'aria-label': `Paused: ${job.id}`,
    onchange: async () => {
      input.disabled = true;
      const action = input.checked ? 'pause' : 'resume';
      try {
        await api(`/jobs/${enc(job.id)}/${action}`, { method: 'POST' });
        toast(`${job.id} ${input.checked ? 'paused' : 'resumed'}`, 'success');
      } catch (e) {
        input.checked = !input.checked;
        toast(e.message, 'error');
      } finally {
        input.disabled = false;
        refresh();
      }
    },
  });
  return h('label', { class: 'switch', title: job.pause_reason || '' },
    input, h('span', { class: 'switch-track', 'aria-hidden': 'true' }),
    h('span', { class: 'switch-text' }, job.paused ? 'Paused' : 'Active'));
}

export function triggerButton(jobId, { label = 'Run now', onDone, className = 'btn btn-small' } = {}) {
  const button = h('button', {
    type: 'button', class: className, 'aria-label': `Trigger ${jobId} now`,
    onclick: async () => {
      button.disabled = true;
      try {
        const { run_id: runId } = await api(`/jobs/${enc(jobId)}/trigger`, { method: 'POST' });
        toast(`Triggered ${runId}`, 'success');
        if (onDone) onDone(runId);
      } catch (e) {
        toast(e.message, 'error');
      } finally {
        button.disabled = false;
      }
    },
  }, h('span', { class: 'icon-play', 'aria-hidden': 'true' }), label);
  return button;
}

function matches(job, needle) {
  if (!needle) return true;
  const hay = [job.id, job.spec?.schedule, job.schedule_description, job.timezone,
    job.spec?.description, job.spec?.command].join(' ').toLowerCase();
  return needle.toLowerCase().split(/\s+/).every((word) => hay.includes(word));
}

export async function render(root, ctx) {
  const tbody = h('tbody');
  const count = h('span', { class: 'count' });
  const search = h('input', {
    type: 'search', id: 'jobs-filter', class: 'input', placeholder: 'Filter by id, schedule, command…',
    'aria-label': 'Filter jobs', value: ctx.query.get('q') || '',
  });
  const status = h('div');
  const more = h('button', { type: 'button', class: 'btn', hidden: true }, 'Load more');
  let jobs = [];
  let cursor = '';
  let last = new Map();

  function draw() {
    const shown = jobs.filter((j) => matches(j, search.value.trim()));
    const total = cursor ? `${jobs.length}+` : `${jobs.length}`;
    count.textContent = shown.length === jobs.length ? `${total} jobs`
      : `${shown.length} of ${total} jobs`;
    more.hidden = !cursor;
    clear(tbody, shown.length ? shown.map((job) => row(job)) : emptyRow(7,
      jobs.length ? 'No job matches the filter.' : h('span', {}, 'No jobs yet. ',
        h('a', { href: '#/new-job' }, 'Create one'), ' or try a schedule in the ',
        h('a', { href: '#/playground' }, 'cron playground'), ' first.')));
  }

  function row(job) {
    const run = last.get(job.id);
    const spec = job.spec || {};
    return h('tr', { dataset: { job: job.id } },
      h('td', { class: 'cell-job cell-main' }, jobLink(job.id),
        spec.description ? h('div', { class: 'muted small' }, spec.description) : null,
        job.read_only ? h('span', { class: 'tag', title: job.source }, 'config') : null),
      h('td', { class: 'cell-schedule cell-main' }, mono(spec.schedule || ''),
        h('div', { class: 'reading' }, job.schedule_description)),
      h('td', { class: 'hide-sm', 'data-label': 'Zone' }, job.timezone),
      h('td', { class: 'cell-next', 'data-label': 'Next fire' }, job.paused ? h('span', { class: 'muted' }, 'paused')
        : job.next_fire ? h('time', { datetime: job.next_fire, title: job.next_fire },
          relative(job.next_fire)) : h('span', { class: 'muted' }, 'never')),
      h('td', { class: 'cell-last', 'data-label': 'Last run' }, run ? h('div', { class: 'last-run' }, outcomeBadge(run.outcome),
        h('span', { class: 'muted small' }, formatDuration(runDuration(run))),
        h('span', { class: 'muted small hide-sm' }, relative(run.scheduled_at)))
        : job.running > 0 ? outcomeBadge('running') : h('span', { class: 'muted' }, 'no runs')),
      h('td', { 'data-label': 'State' }, pausedToggle(job, refresh)),
      h('td', { class: 'cell-actions' }, triggerButton(job.id, { onDone: () => refresh() })));
  }

  async function refresh() {
    try {
      const [list, runs] = await Promise.all([loadJobs(Math.max(PAGE, jobs.length)), lastRuns()]);
      ({ jobs, cursor } = list); // sorted by id by the API
      last = runs;
      status.replaceChildren();
      draw();
    } catch (e) {
      if (e.status === 401) return;
      status.replaceChildren(notice('error', e.message));
    }
  }

  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const page = await api('/jobs', { query: { limit: PAGE, cursor } });
      jobs = jobs.concat(page.jobs);
      cursor = page.next_cursor;
      draw();
    } catch (e) {
      if (e.status !== 401) status.replaceChildren(notice('error', e.message));
    } finally {
      more.disabled = false;
    }
  });
  search.addEventListener('input', draw);
  root.append(
    pageHeader('Jobs', 'Every job the cluster knows, its schedule and what happened last.',
      h('a', { href: '#/new-job', class: 'btn btn-primary' }, 'New job')),
    h('div', { class: 'toolbar' }, h('div', { class: 'search' }, search), count),
    status,
    h('div', { class: 'card table-card' }, h('table', { class: 'table stack align-top', 'aria-label': 'Jobs' },
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Job'), h('th', { scope: 'col' }, 'Schedule'),
        h('th', { scope: 'col', class: 'hide-sm' }, 'Zone'), h('th', { scope: 'col' }, 'Next fire'),
        h('th', { scope: 'col' }, 'Last run'), h('th', { scope: 'col' }, 'State'),
        h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')))),
      tbody)),
    h('div', { class: 'more' }, more));
  await refresh();
  ctx.every(5000, refresh);
}
