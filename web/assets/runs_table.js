// A table of run attempts with expandable output, shared by the Job and Runs pages.
// Expanded rows stay expanded across refreshes; output is fetched on demand (lists carry none).
// The output of a running attempt is followed live (GET /api/v1/runs/{id}?follow=1): one stream
// per expanded running run, kept across refreshes, closed when its row is hidden or left.
import { api, enc, streamEvents } from './api.js';
import {
  clear, emptyRow, formatDuration, h, jobLink, mono, notice, outcomeBadge, relative, runDuration,
  formatInstant, toast,
} from './ui.js';

const key = (run) => `${run.run_id}/${run.attempt}`;

// `onChange`: called after an action on a run (cancel), to refresh the list.
export function createRunsTable({ showJob = false, label = 'Runs', onChange } = {}) {
  const tbody = h('tbody');
  const expanded = new Set();
  const details = new Map(); // key -> attempt record with output
  const followers = new Map(); // key -> {controller, render}: live streams of running attempts
  const columns = showJob ? 9 : 8;

  // Follows `run` (running) while the newest `render`'s cell is on the page.
  function follow(run, render) {
    const k = key(run);
    const known = followers.get(k);
    if (known) {
      known.render = render;
      return;
    }
    const follower = { controller: new AbortController(), render };
    followers.set(k, follower);
    streamEvents(`/runs/${enc(run.run_id)}`, { query: { follow: 1 }, signal: follower.controller.signal },
      (event, data) => {
        if (event !== 'run') return;
        for (const a of data.attempts) details.set(key(a), a);
        if (!follower.render(details.get(k) || data.attempts[data.attempts.length - 1])) {
          follower.controller.abort();
        }
      })
      .catch(() => {}) // the table's refresh shows the run as it is
      .finally(() => followers.delete(k));
  }

  async function loadDetail(run) {
    const k = key(run);
    if (details.has(k) && details.get(k).outcome !== 'running' && run.outcome !== 'running') {
      return details.get(k);
    }
    const { attempts, jitter_offset_ms: jitter } = await api(`/runs/${enc(run.run_id)}`);
    for (const a of attempts) details.set(key(a), { ...a, jitter_offset_ms: jitter });
    return details.get(k) || attempts[attempts.length - 1];
  }

  function detailRow(run, id) {
    const cell = h('td', { colspan: columns }, h('p', { class: 'muted' }, 'Loading output…'));
    // Draws `attempt` into the cell; false once the cell has left the page.
    const render = (attempt) => {
      if (!cell.isConnected) return false;
      const old = cell.querySelector('pre.output');
      const atEnd = !old || old.scrollTop + old.clientHeight >= old.scrollHeight - 4;
      fill(attempt);
      const pre = cell.querySelector('pre.output');
      if (atEnd) pre.scrollTop = pre.scrollHeight;
      return true;
    };
    const fill = (attempt) => {
      const facts = [
        ['Run id', mono(attempt.run_id)],
        ['Scheduled', formatInstant(attempt.scheduled_at)],
        ['Started', formatInstant(attempt.started_at)],
        ['Finished', formatInstant(attempt.finished_at)],
        ['Exit code', attempt.exit_code ?? '—'],
      ];
      if (attempt.cause) facts.push(['Cause', attempt.cause]);
      if (attempt.jitter_offset_ms != null) {
        facts.push(['Jitter', `due ${formatDuration(attempt.jitter_offset_ms)} after its instant`]);
      }
      if (attempt.shard_count > 1) facts.push(['Shard', `${attempt.shard + 1} of ${attempt.shard_count}`]);
      if (attempt.params && Object.keys(attempt.params).length) {
        facts.push(['Parameters', mono(JSON.stringify(attempt.params), { class: 'wrap' })]);
      }
      clear(cell,
        h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
        attempt.error ? notice('error', attempt.error) : null,
        attempt.skip_reason ? notice('info', `Skipped: ${attempt.skip_reason}`) : null,
        // A succeeded run is re-run from here; the row itself offers it for the other outcomes.
        run.outcome === 'succeeded' ? h('div', { class: 'form-actions' }, rerunButton(run)) : null,
        attempt.outcome === 'running'
          ? h('p', { class: 'muted live', role: 'status' }, 'Running: the output below follows it live.')
          : null,
        h('pre', { class: 'output', tabindex: '0', 'aria-label': `Output of ${attempt.run_id}` },
          attempt.output ? attempt.output : h('span', { class: 'muted' }, '(no output)')));
    };
    loadDetail(run).then((attempt) => {
      render(attempt);
      if (attempt.outcome === 'running') follow(attempt, render);
    }).catch((e) => {
      if (e.status !== 401) clear(cell, notice('error', e.message));
    });
    return h('tr', { class: 'detail-row', id }, cell);
  }

  // Cancel of a running run (operate): asks first; the backend records who cancelled it.
  function cancelButton(run) {
    const button = h('button', {
      type: 'button', class: 'btn btn-danger btn-small', 'aria-label': `Cancel ${run.run_id}`,
      onclick: async () => {
        // eslint-disable-next-line no-alert
        if (!window.confirm(`Cancel ${run.run_id}? Its run is stopped and no retry follows.`)) return;
        button.disabled = true;
        try {
          await api(`/runs/${enc(run.run_id)}/cancel`, { method: 'POST' });
          toast(`${run.run_id} cancelled`, 'success');
          details.delete(key(run));
          if (onChange) onChange();
        } catch (e) {
          if (e.status !== 401) toast(e.message, 'error');
          button.disabled = false;
        }
      },
    }, 'Cancel');
    return button;
  }

  // Re-run of a run that ended (operate): its parameters can be changed first (a JSON object;
  // empty keeps the run's own).
  function rerunButton(run) {
    const button = h('button', {
      type: 'button', class: 'btn btn-small', 'aria-label': `Re-run ${run.run_id}`,
      onclick: async () => {
        // eslint-disable-next-line no-alert
        const text = window.prompt(`Re-run ${run.run_id} as its next attempt. Parameters (a JSON object, merged over the run's own):`,
          JSON.stringify(run.params || {}));
        if (text === null) return;
        let params;
        try {
          params = JSON.parse(text.trim() || '{}');
        } catch (e) {
          toast(`params: not valid JSON (${e.message})`, 'error');
          return;
        }
        button.disabled = true;
        try {
          const { attempt } = await api(`/runs/${enc(run.run_id)}/rerun`, { method: 'POST', body: { params } });
          toast(`${run.run_id}: attempt ${attempt} started`, 'success');
          if (onChange) onChange();
        } catch (e) {
          if (e.status !== 401) toast(e.message, 'error');
        } finally {
          button.disabled = false;
        }
      },
    }, 'Re-run');
    return button;
  }

  function rows(run, index) {
    const k = key(run);
    const id = `run-detail-${index}`;
    const open = expanded.has(k);
    const toggle = h('button', {
      type: 'button', class: 'btn btn-ghost btn-small', 'aria-expanded': String(open),
      'aria-controls': id, 'aria-label': `Output of ${run.run_id} attempt ${run.attempt}`,
      onclick: () => {
        if (expanded.has(k)) expanded.delete(k);
        else expanded.add(k);
        const tr = toggle.closest('tr');
        const next = tr.nextElementSibling;
        if (next && next.classList.contains('detail-row')) {
          next.remove();
          toggle.setAttribute('aria-expanded', 'false');
          toggle.textContent = 'Output';
        } else {
          tr.after(detailRow(run, id));
          toggle.setAttribute('aria-expanded', 'true');
          toggle.textContent = 'Hide';
        }
      },
    }, open ? 'Hide' : 'Output');
    const main = h('tr', { dataset: { run: run.run_id, outcome: run.outcome } },
      h('td', { class: 'cell-main' }, mono(run.run_id, { class: 'run-id' })),
      showJob ? h('td', { 'data-label': 'Job' }, jobLink(run.job_id)) : null,
      h('td', { 'data-label': 'Scheduled' }, h('time', { datetime: run.scheduled_at, title: formatInstant(run.scheduled_at) },
        relative(run.scheduled_at))),
      h('td', { 'data-label': 'Outcome' }, outcomeBadge(run.outcome)),
      h('td', { class: 'mono hide-sm', 'data-label': 'Node' }, run.node_id || '—'),
      h('td', { class: 'num hide-sm', 'data-label': 'Attempt' }, run.attempt),
      h('td', { class: 'num mono hide-sm', 'data-label': 'Fencing' }, run.fencing_token),
      h('td', { class: 'num', 'data-label': 'Duration' }, formatDuration(runDuration(run))),
      h('td', { class: 'cell-actions' },
        run.outcome === 'running' ? cancelButton(run) : null,
        run.outcome !== 'running' && run.outcome !== 'succeeded' ? rerunButton(run) : null,
        toggle));
    return open ? [main, detailRow(run, id)] : [main];
  }

  const table = h('table', { class: 'table stack runs-table', 'aria-label': label },
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Run'),
      showJob ? h('th', { scope: 'col' }, 'Job') : null,
      h('th', { scope: 'col' }, 'Scheduled'), h('th', { scope: 'col' }, 'Outcome'),
      h('th', { scope: 'col', class: 'hide-sm' }, 'Node'),
      h('th', { scope: 'col', class: 'num hide-sm' }, 'Attempt'),
      h('th', { scope: 'col', class: 'num hide-sm' }, 'Fencing'),
      h('th', { scope: 'col', class: 'num' }, 'Duration'),
      h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Output')))),
    tbody);

  return {
    element: h('div', { class: 'card table-card' }, table),
    update(runs, emptyText = 'No runs yet.') {
      clear(tbody, runs.length ? runs.map((run, i) => rows(run, i)) : emptyRow(columns, emptyText));
    },
  };
}
