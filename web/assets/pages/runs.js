// Runs across jobs, newest first: filter by outcome (quick tabs) and job; "Load more" follows the
// API's cursor.
import { api } from '../api.js';
import { createRunsTable } from '../runs_table.js';
import { h, notice, OUTCOMES, pageHeader } from '../ui.js';

export async function render(root, ctx) {
  const outcome = h('select', { id: 'runs-outcome', class: 'input', 'aria-label': 'Filter by outcome' },
    h('option', { value: '' }, 'All outcomes'),
    OUTCOMES.map((o) => h('option', { value: o, selected: ctx.query.get('outcome') === o },
      o.replace('_', ' '))));
  const job = h('input', {
    id: 'runs-job', type: 'search', class: 'input mono', placeholder: 'job id',
    'aria-label': 'Filter by job id', value: ctx.query.get('job') || '',
  });
  const tabs = h('div', { class: 'tabs', role: 'group', 'aria-label': 'Quick filters' },
    [['', 'Recent'], ['failed', 'Failed'], ['timed_out', 'Timed out'], ['running', 'Running'],
      ['lost', 'Lost']].map(([value, text]) => h('button', {
      type: 'button', class: 'tab', dataset: { outcome: value },
      onclick: () => {
        outcome.value = value;
        reload();
      },
    }, text)));
  const status = h('div');
  const table = createRunsTable({ showJob: true, label: 'Runs', onChange: () => reload() });
  const more = h('button', { type: 'button', class: 'btn', hidden: true }, 'Load more');
  let runs = [];
  let cursor = '';
  let pages = 1;
  let lastPageSize = 0;

  function query(extra = {}) {
    return { outcome: outcome.value, job: job.value.trim(), limit: 50, ...extra };
  }

  function syncTabs() {
    for (const tab of tabs.children) {
      const on = tab.dataset.outcome === outcome.value;
      tab.classList.toggle('active', on);
      tab.setAttribute('aria-pressed', String(on));
    }
  }

  async function reload() {
    syncTabs();
    const q = new URLSearchParams();
    if (outcome.value) q.set('outcome', outcome.value);
    if (job.value.trim()) q.set('job', job.value.trim());
    history.replaceState(null, '', `#/runs${q.toString() ? `?${q}` : ''}`);
    pages = 1;
    try {
      const page = await api('/runs', { query: query() });
      runs = page.runs;
      cursor = page.next_cursor;
      lastPageSize = page.runs.length;
      status.replaceChildren();
      draw();
    } catch (e) {
      if (e.status !== 401) status.replaceChildren(notice('error', e.message));
    }
  }

  function draw() {
    table.update(runs, outcome.value || job.value ? 'No run matches these filters.' : 'No runs yet.');
    // A short page is the last one, whatever the cursor says.
    more.hidden = !cursor || lastPageSize < 50;
  }

  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const page = await api('/runs', { query: query({ cursor }) });
      runs = runs.concat(page.runs);
      cursor = page.next_cursor;
      lastPageSize = page.runs.length;
      pages += 1;
      draw();
    } catch (e) {
      if (e.status !== 401) status.replaceChildren(notice('error', e.message));
    } finally {
      more.disabled = false;
    }
  });
  outcome.addEventListener('change', reload);
  let timer = null;
  job.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(reload, 250);
  });

  root.append(
    pageHeader('Runs', 'Every attempt across jobs, newest first.'),
    h('div', { class: 'toolbar' }, tabs,
      h('div', { class: 'filters' }, outcome, h('div', { class: 'search' }, job))),
    status, table.element, h('div', { class: 'more' }, more));
  await reload();
  // Only the first page refreshes by itself; after "Load more" the user owns the list.
  ctx.every(5000, () => {
    if (pages === 1) reload();
  });
}
