// Nodes with a live heartbeat: host, version, uptime, running fires and measured clock skew.
import { api } from '../api.js';
import { clear, emptyRow, h, mono, notice, pageHeader, relative, timeCell } from '../ui.js';

// Claims refuse fires earlier than the backend's clock + skew_tolerance (default 500 ms).
const SKEW_WARN_MS = 250;
const SKEW_BAD_MS = 500;

function skewCell(ms) {
  const abs = Math.abs(ms);
  const kind = abs >= SKEW_BAD_MS ? 'bad' : abs >= SKEW_WARN_MS ? 'warn' : 'ok';
  return h('span', { class: `skew skew-${kind}`, title: 'node clock minus backend clock' },
    `${ms > 0 ? '+' : ''}${ms} ms`);
}

export async function render(root, ctx) {
  const tbody = h('tbody');
  const status = h('div');
  const count = h('span', { class: 'count' });

  async function refresh() {
    try {
      const { nodes } = await api('/nodes');
      nodes.sort((a, b) => a.id.localeCompare(b.id));
      count.textContent = `${nodes.length} alive`;
      status.replaceChildren();
      clear(tbody, nodes.length ? nodes.map((n) => h('tr', {},
        h('td', { class: 'cell-main' }, h('span', { class: 'dot dot-ok', 'aria-hidden': 'true' }), mono(n.id)),
        h('td', { class: 'mono', 'data-label': 'Host' }, n.host),
        h('td', { class: 'mono hide-sm', 'data-label': 'Version' }, n.version),
        h('td', { class: 'hide-sm', 'data-label': 'Started' }, timeCell(n.started_at)),
        h('td', { 'data-label': 'Heartbeat' }, h('time', { datetime: n.last_heartbeat, title: n.last_heartbeat },
          relative(n.last_heartbeat))),
        h('td', { class: 'num', 'data-label': 'Running' }, n.running),
        h('td', { class: 'num', 'data-label': 'Clock skew' }, skewCell(n.clock_skew_ms))))
        : emptyRow(7, 'No node has a live heartbeat.'));
    } catch (e) {
      if (e.status !== 401) status.replaceChildren(notice('error', e.message));
    }
  }

  root.append(
    pageHeader('Nodes', 'Nodes with a live heartbeat in the coordination backend.', count),
    status,
    h('div', { class: 'card table-card' }, h('table', { class: 'table stack', 'aria-label': 'Nodes' },
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Node'), h('th', { scope: 'col' }, 'Host'),
        h('th', { scope: 'col', class: 'hide-sm' }, 'Version'),
        h('th', { scope: 'col', class: 'hide-sm' }, 'Started'),
        h('th', { scope: 'col' }, 'Heartbeat'), h('th', { scope: 'col', class: 'num' }, 'Running'),
        h('th', { scope: 'col', class: 'num' }, 'Clock skew'))),
      tbody)));
  await refresh();
  ctx.every(3000, refresh);
}
