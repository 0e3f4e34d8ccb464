// DOM and formatting helpers. Everything is built with createElement (never innerHTML), so job
// ids, commands and run output from the server cannot inject markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false || child === '') continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'dataset') {
      Object.assign(node.dataset, value);
    } else if (key === 'value' || key === 'checked' || key === 'disabled' || key === 'selected') {
      node[key] = value;
    } else {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

// h('a', {href: '#/jobs', class: 'x'}, 'text', child, [more]) -> HTMLElement.
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

// The same for SVG elements.
export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

export function clear(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// ---------------------------------------------------------------------------- time ----------

export function parseInstant(iso) {
  if (!iso) return null;
  const t = Date.parse(iso);
  // The epoch stands for "never" in some records (e.g. a skipped fire has no start).
  return Number.isFinite(t) && t > 0 ? t : null;
}

const formatters = new Map();
function formatter(timeZone) {
  const key = timeZone || '';
  if (!formatters.has(key)) {
    try {
      formatters.set(key, new Intl.DateTimeFormat('en-GB', {
        timeZone: timeZone || undefined, weekday: 'short', year: 'numeric', month: 'short',
        day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
        timeZoneName: 'short',
      }));
    } catch {
      return formatter('UTC');
    }
  }
  return formatters.get(key);
}

// "Mon, 30 Nov 2026, 01:08:55 CET" in `timeZone` (default: the browser's zone).
export function formatInstant(iso, timeZone) {
  const t = parseInstant(iso);
  return t === null ? '—' : formatter(timeZone).format(t);
}

// "14:05:10" (browser zone), for dense tables.
export function formatClock(iso) {
  const t = parseInstant(iso);
  if (t === null) return '—';
  return new Date(t).toLocaleTimeString('en-GB', { hourCycle: 'h23' });
}

// "in 4s", "3m ago", "2h ago", "5d ago".
export function relative(iso, now = Date.now()) {
  const t = parseInstant(iso);
  if (t === null) return '';
  const diff = t - now;
  const abs = Math.abs(diff);
  let text;
  if (abs < 1000) return diff >= 0 ? 'now' : 'just now';
  if (abs < 60e3) text = `${Math.round(abs / 1e3)}s`;
  else if (abs < 3600e3) text = `${Math.round(abs / 60e3)}m`;
  else if (abs < 86400e3) text = `${Math.round(abs / 3600e3)}h`;
  else text = `${Math.round(abs / 86400e3)}d`;
  return diff > 0 ? `in ${text}` : `${text} ago`;
}

// A <time> element: the absolute instant, with the relative one as a hint.
export function timeCell(iso, { timeZone, withRelative = true } = {}) {
  if (parseInstant(iso) === null) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: iso, title: iso },
    formatInstant(iso, timeZone),
    withRelative ? h('span', { class: 'rel' }, relative(iso)) : null);
}

// Milliseconds -> "420 ms", "3.2 s", "4m 05s", "2h 10m".
export function formatDuration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60e3) return `${(ms / 1000).toFixed(ms < 10e3 ? 2 : 1)} s`;
  if (ms < 3600e3) {
    const m = Math.floor(ms / 60e3);
    return `${m}m ${String(Math.floor((ms % 60e3) / 1000)).padStart(2, '0')}s`;
  }
  const hours = Math.floor(ms / 3600e3);
  return `${hours}h ${String(Math.floor((ms % 3600e3) / 60e3)).padStart(2, '0')}m`;
}

// A run's duration: finished - started, or now - started while it runs.
export function runDuration(run, now = Date.now()) {
  const start = parseInstant(run.started_at);
  if (start === null) return null;
  if (run.outcome === 'running') return Math.max(0, now - start);
  const end = parseInstant(run.finished_at);
  return end === null ? null : Math.max(0, end - start);
}

// ------------------------------------------------------------------------ widgets ----------

export const OUTCOMES = ['running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'lost'];

export function outcomeBadge(outcome) {
  const known = OUTCOMES.includes(outcome) ? outcome : 'unknown';
  return h('span', { class: `badge outcome-${known}` }, (outcome || 'unknown').replace('_', ' '));
}

export function mono(text, attrs = {}) {
  return h('code', { ...attrs, class: `mono ${attrs.class || ''}`.trim() }, text);
}

export function jobLink(id) {
  return h('a', { href: `#/jobs/${encodeURIComponent(id)}`, class: 'mono job-link' }, id);
}

// A notice box: kind is info | error | warn.
export function notice(kind, ...children) {
  return h('div', { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : null },
    ...children);
}

export function emptyRow(colspan, text) {
  return h('tr', { class: 'empty' }, h('td', { colspan }, text));
}

export function pageHeader(title, subtitle, ...actions) {
  return h('div', { class: 'page-header' },
    h('div', {}, h('h1', {}, title), subtitle ? h('p', { class: 'subtitle' }, subtitle) : null),
    actions.length ? h('div', { class: 'actions' }, ...actions) : null);
}

// A transient message in the corner (also read by screen readers: #toasts is aria-live).
export function toast(text, kind = 'info') {
  const box = document.getElementById('toasts');
  if (!box) return;
  const item = h('div', { class: `toast toast-${kind}` }, text);
  box.append(item);
  setTimeout(() => item.classList.add('leaving'), 3500);
  setTimeout(() => item.remove(), 4000);
}

// Calls fn at most once per `ms` after the last call.
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

// Pretty JSON for definitions and audit details.
export function prettyJson(value) {
  return h('pre', { class: 'code-block' }, JSON.stringify(value, null, 2));
}

// A list of fires (RFC 3339 UTC instants) shown in `zone`, with the schedule's instants that
// exclusions leave out (`excluded`) in their place, struck through (the cron preview's answer).
// `utc`: also show each in UTC.
export function firesList(next, excluded, zone, label, { utc = false } = {}) {
  const items = [
    ...next.map((t) => ({ t, out: false })),
    ...(excluded || []).map((t) => ({ t, out: true })),
  ].sort((a, b) => parseInstant(a.t) - parseInstant(b.t));
  return h('ol', { class: 'fires', 'aria-label': label }, items.map(({ t, out }) => (out
    ? h('li', { class: 'fire-excluded' },
      h('s', {}, h('time', { datetime: t }, formatInstant(t, zone))),
      h('span', { class: 'muted small' }, 'excluded'))
    : h('li', {},
      h('time', { datetime: t }, formatInstant(t, zone)),
      h('span', { class: 'muted small' }, relative(t)),
      utc && zone !== 'UTC' ? h('span', { class: 'muted small utc' }, formatInstant(t, 'UTC')) : null))));
}
