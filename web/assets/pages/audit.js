// The audit log (admin tokens): every mutating call with who, what, the answer and the
// definition or state before and after.
import { api } from '../api.js';
import {
  clear, emptyRow, formatInstant, h, jobLink, notice, pageHeader, prettyJson, relative,
} from '../ui.js';

const ACTIONS = ['create', 'replace', 'delete', 'pause', 'resume', 'trigger', 'cancel', 'rerun'];

// The answer's HTTP status, with how the call ended (ok, denied, not_found, ...) as its tooltip.
function statusCell(entry) {
  const code = entry.status;
  const kind = code < 300 ? 'ok' : code < 500 ? 'warn' : 'bad';
  return h('span', { class: `http-status http-${kind}`, title: entry.result }, code);
}

export async function render(root, ctx) {
  const tbody = h('tbody');
  const status = h('div');
  const note = h('p', { class: 'muted small' });
  const action = h('select', { id: 'audit-action', class: 'input', 'aria-label': 'Filter by action' },
    h('option', { value: '' }, 'All actions'), ACTIONS.map((a) => h('option', { value: a }, a)));
  const expanded = new Set();
  let entries = [];

  function draw() {
    const shown = entries.filter((e) => !action.value || e.action === action.value);
    clear(tbody, shown.length ? shown.map((e) => {
      const open = expanded.has(e.seq);
      const id = `audit-detail-${e.seq}`;
      const hasDetail = e.before !== null || e.after !== null;
      const toggle = hasDetail ? h('button', {
        type: 'button', class: 'btn btn-ghost btn-small', 'aria-expanded': String(open),
        'aria-controls': id, 'aria-label': `Details of entry ${e.seq}`,
        onclick: () => {
          if (open) expanded.delete(e.seq);
          else expanded.add(e.seq);
          draw();
        },
      }, open ? 'Hide' : 'Details') : null;
      const row = h('tr', { dataset: { action: e.action, target: e.target } },
        h('td', { class: 'num mono hide-sm', 'data-label': '#' }, e.seq),
        h('td', { 'data-label': 'When' }, h('time', { datetime: e.at, title: formatInstant(e.at) }, relative(e.at))),
        h('td', { 'data-label': 'Who' }, e.who),
        h('td', { 'data-label': 'Action' }, h('span', { class: `badge action action-${e.action}` }, e.action)),
        h('td', { 'data-label': 'Job' }, jobLink(e.target)),
        h('td', { class: 'num', 'data-label': 'Status' }, statusCell(e)),
        h('td', { class: 'cell-actions' }, toggle));
      if (!open) return row;
      return [row, h('tr', { class: 'detail-row', id }, h('td', { colspan: 7 },
        h('div', { class: 'grid-2 tight' },
          h('div', {}, h('h3', {}, 'Before'), e.before === null ? h('p', { class: 'muted' }, '—') : prettyJson(e.before)),
          h('div', {}, h('h3', {}, 'After'), e.after === null ? h('p', { class: 'muted' }, '—') : prettyJson(e.after)))))];
    }) : emptyRow(7, entries.length ? 'No entry matches the filter.' : 'No changes recorded yet.'));
  }

  async function refresh() {
    try {
      const data = await api('/audit', { query: { limit: 500 } });
      entries = data.entries;
      note.textContent = 'Every node\'s changes, kept in the backend (the newest 10,000).';
      status.replaceChildren();
      draw();
    } catch (e) {
      if (e.status === 401) return;
      status.replaceChildren(notice('error', e.status === 403
        ? 'The audit log needs an admin token.' : e.message));
    }
  }

  action.addEventListener('change', draw);
  root.append(
    pageHeader('Audit log', 'Every create, replace, delete, pause, resume, trigger, cancel and re-run, newest first.'),
    h('div', { class: 'toolbar' }, h('div', { class: 'filters' }, action), note),
    status,
    h('div', { class: 'card table-card' }, h('table', { class: 'table stack', 'aria-label': 'Audit log' },
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', class: 'num hide-sm' }, '#'), h('th', { scope: 'col' }, 'When'),
        h('th', { scope: 'col' }, 'Who'), h('th', { scope: 'col' }, 'Action'),
        h('th', { scope: 'col' }, 'Job'), h('th', { scope: 'col', class: 'num' }, 'Status'),
        h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Details')))),
      tbody)));
  await refresh();
  ctx.every(5000, refresh);
}
