// The job form: every key of a jobs file (docs/configuration.md "Jobs files"), to create a job
// (POST /api/v1/jobs) or replace one (PUT /api/v1/jobs/{id} with If-Match). The form checks only
// what its own encodings can get wrong (JSON, one item a line, integers); every other rule is the
// API's, whose 400 names the key: the message is shown next to that key's input, and a message
// that names no input of the form is shown above the buttons. An empty input sends nothing, so
// the key takes the server's [defaults] and built-in default.
import { api, enc } from './api.js';
import { clear, debounce, h, notice, toast } from './ui.js';

// kind: text | duration | int | size | select | bool | lines | map | json.
const field = (key, label, kind, extra = {}) => ({ key, label, kind, ...extra });

const ENUMS = {
  overlap: ['forbid', 'allow', 'replace', 'buffer_one', 'buffer_all'],
  misfire: ['skip', 'once', 'all'],
  on_lost: ['fail', 'rerun'],
};

const FIELDS = [
  field('id', 'Job id', 'text', {
    mono: true, placeholder: 'nightly-report', createOnly: true,
    hint: 'Letters, digits and _ . - (at most 128); it seeds H in the schedule and cannot change later.',
  }),
  field('description', 'Description', 'text', { placeholder: 'optional', hint: 'Up to 4096 bytes.' }),
  field('enabled', 'Enabled', 'bool', { hint: 'A disabled job is defined but never scheduled.' }),
  field('schedule', 'Schedule', 'text', {
    mono: true, placeholder: '*/5 * * * *',
    hint: '5, 6 (with seconds) or 7 (with year) fields, macros such as @daily, H, @every 90s.',
  }),
  field('timezone', 'Time zone', 'text', { placeholder: 'UTC', hint: 'IANA name; empty: UTC (or the server default).' }),
  field('start_at', 'Starts at', 'text', {
    group: 'window', mono: true, placeholder: '2026-03-01T00:00:00Z', hint: 'RFC 3339; no fire before it.',
  }),
  field('end_at', 'Ends at', 'text', {
    group: 'window', mono: true, placeholder: '2026-06-30T23:59:59Z', hint: 'RFC 3339; no fire after it.',
  }),
  field('max_runs', 'At most N fires', 'int', {
    group: 'window', placeholder: '0 (no limit)', hint: 'The first N fires from "Starts at" (which it needs).',
  }),
  field('jitter', 'Jitter', 'duration', {
    group: 'window', placeholder: '0s', hint: '0-1h; each fire waits an offset of its own, the same on every node.',
  }),
  field('exclude', 'Excluded', 'lines', {
    group: 'window', mono: true, placeholder: '2026-12-25\n2026-12-24/2026-12-31\n0 0 0 * * SAT,SUN',
    hint: 'Dates, date ranges (from/to) or cron expressions, one a line, in the job\'s zone.',
  }),
  field('calendars', 'Calendars', 'lines', {
    group: 'window', mono: true, placeholder: 'cn-holidays', hint: 'Ids of the server\'s calendars, one a line.',
  }),
  field('record_excluded', 'Record excluded fires', 'bool', {
    group: 'window', off: true, hint: 'An excluded instant gets a skipped record ("excluded").',
  }),
  field('on_success', 'On success, fire', 'lines', {
    group: 'children', mono: true, placeholder: 'load-warehouse',
    hint: 'Job ids, one a line, fired at this fire\'s instant when a run succeeds (after its retries).',
  }),
  field('on_failure', 'On failure, fire', 'lines', {
    group: 'children', mono: true, placeholder: 'page-on-call', hint: 'When a run fails, times out or is lost.',
  }),
  field('on_complete', 'When done, fire', 'lines', {
    group: 'children', mono: true, placeholder: 'cleanup', hint: 'Whatever the outcome.',
  }),
  field('after', 'Join: run after', 'lines', {
    group: 'children', mono: true, placeholder: 'extract-eu\nextract-us',
    hint: 'Job ids, one a line: runs for an instant once each of their fires of it succeeded.',
  }),
  field('join_timeout', 'Join timeout', 'duration', {
    group: 'children', placeholder: '0s (none)', hint: '0-1h; then the instant is recorded as skipped, naming who is missing.',
  }),
  field('command', 'Command', 'text', {
    mono: true, executor: 'command', placeholder: '/opt/report --full',
    hint: 'Run with /bin/sh -c on the node that claims the fire.',
  }),
  field('argv', 'Arguments (argv)', 'lines', {
    mono: true, executor: 'argv', placeholder: '/usr/local/bin/warm\n--all',
    hint: 'One argument a line, the program first; exec\'d directly, never through a shell.',
  }),
  field('http.url', 'URL', 'text', {
    mono: true, executor: 'http', placeholder: 'http://127.0.0.1:9000/report',
    hint: 'http:// or https://, a host and optional port.',
  }),
  field('http.method', 'Method', 'select', { executor: 'http', options: ['POST', 'GET'], noDefault: true }),
  field('http.headers', 'Headers', 'map', {
    mono: true, executor: 'http', separator: ':', placeholder: 'X-Team: fin',
    hint: 'One "Name: value" a line.',
  }),
  field('params', 'Default parameters (JSON object)', 'json', {
    mono: true, placeholder: '{"month": "prev"}',
    hint: 'What a run sees as GNOMON_PARAMS; a trigger\'s parameters are merged over them. At most 16 KiB.',
  }),
  field('env', 'Environment', 'map', {
    mono: true, separator: '=', placeholder: 'SETTLE_MODE=strict',
    hint: 'Process jobs: one NAME=value a line. "(secret)" keeps the stored value.',
  }),
  field('timeout', 'Timeout', 'duration', { placeholder: '0s (none)', hint: '0-30d; cancels the run.' }),
  field('retries', 'Retries', 'int', { placeholder: '0', hint: '0-100 further attempts after a failure.' }),
  field('retry_backoff', 'Retry backoff', 'duration', { placeholder: '10s', hint: 'First delay; doubles, full jitter, at most 10m.' }),
  field('overlap', 'Overlap', 'select', { options: ENUMS.overlap, hint: 'A fire while a run of the job is still running.' }),
  field('misfire', 'Misfire', 'select', { options: ENUMS.misfire, hint: 'Fires missed while the whole cluster was down.' }),
  field('catchup_window', 'Catch-up window', 'duration', { placeholder: '1h', hint: '0-366d; how far back missed fires are caught up.' }),
  field('on_lost', 'Lost runs', 'select', { options: ENUMS.on_lost, hint: 'fail: at most once; rerun: at least once.' }),
  field('shards', 'Shards', 'int', { advanced: true, placeholder: '1', hint: '1-1024 fires per instant.' }),
  field('max_consecutive_failures', 'Pause after failures', 'int', {
    advanced: true, placeholder: '0 (off)', hint: 'Consecutive failures after which the job pauses itself; 0: never.',
  }),
  field('kill_grace', 'Kill grace', 'duration', { advanced: true, placeholder: '10s', hint: '0-1h between SIGTERM and SIGKILL.' }),
  field('history_keep', 'History records kept', 'int', { advanced: true, placeholder: '100', hint: '1-100000 per job.' }),
  field('history_max_age', 'History max age', 'duration', { advanced: true, placeholder: '7d', hint: '1m-3660d.' }),
  field('queue', 'Queue', 'text', { advanced: true, mono: true, placeholder: 'default', hint: 'Queue mode: the worker tag its fires go to.' }),
  field('run_as', 'Run as', 'text', { advanced: true, mono: true, placeholder: 'user[:group]', hint: 'Process jobs; empty: the daemon\'s user or the policy\'s.' }),
  field('inherit_env', 'Inherited variables', 'lines', {
    advanced: true, mono: true, placeholder: 'PATH\nLANG', hint: 'Process jobs: one name a line of the daemon\'s environment.',
  }),
  field('memory_max', 'Memory limit', 'size', { advanced: true, placeholder: '0 (none), e.g. 512M', hint: 'Process jobs: bytes or 512M, 2G.' }),
  field('cpu_max', 'CPU time limit', 'duration', { advanced: true, placeholder: '0s (none)', hint: 'Process jobs: CPU time of each process.' }),
  field('pids_max', 'Process limit', 'int', { advanced: true, placeholder: '0 (none)', hint: 'Process jobs: 0-1000000 processes.' }),
  field('open_files', 'Open files limit', 'int', { advanced: true, placeholder: '0 (none)', hint: 'Process jobs: 0-1048576 descriptors.' }),
];

const EXECUTORS = [
  ['command', 'Shell'],
  ['argv', 'Program (argv)'],
  ['http', 'HTTP request'],
];

const inputId = (key) => `jf-${key.replace(/\./g, '-')}`;

// The form key an API error is about: its `field`, else the key its message starts with
// (`job "x": retries: expected an integer`); '' when it names no input of the form.
export function errorKey(error, keys) {
  let path = error.field || '';
  if (!path) {
    const m = String(error.message || '').match(/^(?:job "(?:[^"\\]|\\.)*": )*([a-z_]+(?:\.[a-z_]+)?)/);
    path = m ? m[1] : '';
  }
  path = path.replace(/\[\d+\]$/, '');
  while (path && !keys.includes(path)) {
    const dot = path.lastIndexOf('.');
    path = dot < 0 ? '' : path.slice(0, dot);
  }
  return path;
}

// The message without the job prefix the API puts before it (the form shows one job).
function shortMessage(message) {
  return String(message || '').replace(/^(?:job "(?:[^"\\]|\\.)*": )+/, '');
}

function spreadJson(value) {
  return value && typeof value === 'object' && Object.keys(value).length
    ? JSON.stringify(value, null, 2) : '';
}

// The text an input shows for a value of the job's spec.
function shown(def, value) {
  if (value === undefined || value === null) return '';
  switch (def.kind) {
    case 'lines': return (value || []).join('\n');
    case 'map': return Object.entries(value || {})
      .map(([k, v]) => `${k}${def.separator === ':' ? ': ' : '='}${v}`).join('\n');
    case 'json': return spreadJson(value);
    default: return String(value);
  }
}

function specValue(spec, key) {
  if (key.startsWith('http.')) return spec.http ? spec.http[key.slice(5)] : undefined;
  return spec[key];
}

// Builds one input with its label, hint and error line; returns {def, row, input, error, read}.
function buildField(def) {
  const id = inputId(def.key);
  const helpId = `${id}-help`;
  const errorId = `${id}-error`;
  const describedBy = `${def.hint ? helpId : ''} ${errorId}`.trim();
  let input;
  if (def.kind === 'select') {
    input = h('select', { id, class: 'input', 'aria-describedby': describedBy },
      def.noDefault ? null : h('option', { value: '' }, 'default'),
      def.options.map((o) => h('option', { value: o }, o)));
  } else if (def.kind === 'bool') {
    input = h('input', { id, type: 'checkbox', class: 'checkbox', checked: def.off !== true, 'aria-describedby': describedBy });
  } else if (['lines', 'map', 'json'].includes(def.kind)) {
    input = h('textarea', {
      id, class: `input textarea${def.mono ? ' mono' : ''}`, rows: def.kind === 'json' ? '4' : '3',
      spellcheck: 'false', placeholder: def.placeholder, 'aria-describedby': describedBy,
    });
  } else {
    input = h('input', {
      id, class: `input${def.mono ? ' mono' : ''}`, type: 'text', spellcheck: 'false',
      autocomplete: 'off', placeholder: def.placeholder, 'aria-describedby': describedBy,
      inputmode: def.kind === 'int' ? 'numeric' : null,
      list: def.key === 'timezone' ? 'jf-zones' : null,
    });
  }
  const error = h('p', { id: errorId, class: 'field-error' });
  const hint = def.hint ? h('p', { class: 'hint', id: helpId }, def.hint) : null;
  const label = h('label', { for: id, class: 'label' }, def.label);
  // Changing the input takes its error away; the next submit checks it again.
  input.addEventListener(def.kind === 'select' || def.kind === 'bool' ? 'change' : 'input', () => {
    error.textContent = '';
    input.removeAttribute('aria-invalid');
  });
  const row = def.kind === 'bool'
    ? h('div', { class: 'field field-check' }, h('div', { class: 'check' }, input, label), hint, error)
    : h('div', { class: `field${['lines', 'map', 'json'].includes(def.kind) ? ' span-2' : ''}` },
      label, input, hint, error);
  return { def, row, input, error };
}

function zoneList() {
  let list = [];
  try {
    list = Intl.supportedValuesOf('timeZone');
  } catch {
    list = [];
  }
  return h('datalist', { id: 'jf-zones' }, ['UTC', ...list.filter((z) => z !== 'UTC')]
    .map((z) => h('option', { value: z })));
}

// The text of the inputs -> {body, problems: [[key, message]]}.
function collect(fields, executor, editing) {
  const body = {};
  const problems = [];
  for (const { def, input } of fields) {
    if (editing && def.createOnly) continue;
    if (def.executor && def.executor !== executor) continue;
    const raw = def.kind === 'bool' ? input.checked : input.value;
    let value;
    switch (def.kind) {
      case 'bool':
        value = raw;
        break;
      case 'int': {
        const text = raw.trim();
        if (!text) break;
        if (!/^-?\d+$/.test(text)) problems.push([def.key, `${def.key}: expected an integer, got "${text}"`]);
        else value = Number(text);
        break;
      }
      case 'size': {
        const text = raw.trim();
        if (text) value = /^\d+$/.test(text) ? Number(text) : text;
        break;
      }
      case 'lines': {
        const lines = raw.split('\n').map((l) => l.replace(/\r$/, ''))
          .map((l) => (def.key === 'argv' ? l : l.trim())).filter((l) => l.trim() !== '');
        if (lines.length) value = lines;
        break;
      }
      case 'map': {
        const map = {};
        raw.split('\n').forEach((line, i) => {
          if (!line.trim()) return;
          const at = line.indexOf(def.separator);
          const name = at < 0 ? '' : line.slice(0, at).trim();
          if (!name) {
            problems.push([def.key, `${def.key}: line ${i + 1}: expected ${def.separator === ':' ? 'Name: value' : 'NAME=value'}`]);
            return;
          }
          if (Object.hasOwn(map, name)) problems.push([def.key, `${def.key}: line ${i + 1}: "${name}" is given twice`]);
          const rest = line.slice(at + 1).replace(/\r$/, '');
          map[name] = def.separator === ':' ? rest.trim() : rest;
        });
        if (Object.keys(map).length) value = map;
        break;
      }
      case 'json': {
        const text = raw.trim();
        if (!text) break;
        try {
          value = JSON.parse(text);
        } catch (e) {
          problems.push([def.key, `${def.key}: not valid JSON (${e.message})`]);
          break;
        }
        if (value === null || typeof value !== 'object' || Array.isArray(value)) {
          problems.push([def.key, `${def.key}: must be a JSON object, e.g. {"month": "2026-11"}`]);
          value = undefined;
        }
        break;
      }
      default: {
        const text = def.key === 'command' ? raw : raw.trim();
        if (text.trim()) value = text;
      }
    }
    if (value === undefined) continue;
    if (def.key.startsWith('http.')) {
      body.http = body.http || {};
      body.http[def.key.slice(5)] = value;
    } else {
      body[def.key] = value;
    }
  }
  if (executor === 'http' && !body.http) body.http = {};
  return { body, problems };
}

// createJobForm({job, etag, prefill, onSaved}) -> {element, focus()}. Without `job`: a new job
// (prefill: {id, schedule, timezone}); with it: the form to replace that job, sent with If-Match: etag.
export function createJobForm({ job = null, etag = '', prefill = {}, onSaved, onReload }) {
  const editing = job !== null;
  const fields = FIELDS.filter((def) => !(editing && def.createOnly)).map((def) => buildField(def));
  const byKey = new Map(fields.map((f) => [f.def.key, f]));
  const keys = [...byKey.keys()];
  const formError = h('div', { id: 'jf-form-error', 'aria-live': 'assertive' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, editing ? 'Save changes' : 'Create job');
  const reading = h('p', { id: 'jf-schedule-reading', class: 'hint reading-line', 'aria-live': 'polite' });
  const advanced = h('details', { class: 'advanced span-2' });

  // Executor: radio buttons; only the chosen executor's inputs are shown and sent.
  const spec = job ? job.spec : {};
  let executor = spec.http ? 'http' : spec.argv && spec.argv.length ? 'argv' : 'command';
  const radios = EXECUTORS.map(([value, label]) => {
    const radio = h('input', {
      type: 'radio', name: 'jf-executor', id: `jf-executor-${value}`, value, checked: value === executor,
      onchange: () => {
        executor = value;
        showExecutor();
      },
    });
    return h('label', { class: 'radio', for: `jf-executor-${value}` }, radio, label);
  });
  function showExecutor() {
    for (const f of fields) if (f.def.executor) f.row.hidden = f.def.executor !== executor;
  }

  // Prefill: the job's definition, or the playground's schedule and zone.
  if (editing) {
    for (const f of fields) {
      const value = specValue(spec, f.def.key);
      if (f.def.kind === 'bool') f.input.checked = value === undefined ? f.def.off !== true : value !== false;
      else f.input.value = shown(f.def, value);
    }
  } else {
    byKey.get('id').input.value = prefill.id || '';
    byKey.get('schedule').input.value = prefill.schedule || '';
    byKey.get('timezone').input.value = prefill.timezone || '';
  }
  showExecutor();

  // The schedule's reading, from the server's parser, as it is typed.
  let seq = 0;
  async function readSchedule() {
    const expr = byKey.get('schedule').input.value.trim();
    const mine = ++seq;
    if (!expr) {
      reading.textContent = '';
      return;
    }
    try {
      const data = await api('/cron/preview', {
        query: {
          expr, tz: byKey.get('timezone').input.value.trim() || 'UTC', n: 1,
          job: editing ? job.id : byKey.get('id').input.value.trim() || undefined,
        },
      });
      if (mine !== seq) return;
      reading.classList.remove('is-problem');
      reading.textContent = `Reads as: ${data.description}`;
    } catch (e) {
      if (mine !== seq || e.status === 401) return;
      reading.classList.add('is-problem');
      reading.textContent = `Not valid yet: ${e.message}`;
    }
  }
  const readLater = debounce(readSchedule, 150);
  byKey.get('schedule').input.addEventListener('input', readLater);
  byKey.get('timezone').input.addEventListener('input', readLater);
  byKey.get('schedule').row.append(reading);

  function clearErrors() {
    formError.replaceChildren();
    for (const f of fields) {
      f.error.textContent = '';
      f.input.removeAttribute('aria-invalid');
    }
  }

  // Shows each problem next to its input (the form-level box for the others); focus goes to the
  // first input with a problem, else to the form-level message.
  function showProblems(problems) {
    let first = null;
    const mainOf = { command: 'command', argv: 'argv', http: 'http.url' };
    for (const [key, message] of problems) {
      let f = byKey.get(key);
      // "a job needs one of command, argv or http" is about the executor chosen.
      if (f && f.row.hidden && f.def.executor) f = byKey.get(mainOf[executor]);
      if (!f || f.row.hidden) {
        formError.append(notice('error', message));
        continue;
      }
      f.error.textContent = f.error.textContent ? `${f.error.textContent} ${message}` : message;
      f.input.setAttribute('aria-invalid', 'true');
      if (!first) first = f;
    }
    if (first) {
      if (first.def.advanced) advanced.open = true;
      first.input.focus();
    } else {
      const box = formError.firstElementChild;
      if (box) {
        box.setAttribute('tabindex', '-1');
        box.focus();
      }
    }
  }

  // A conflict: someone changed (or deleted) the job since this form was filled. Nothing is
  // overwritten; the user reloads the current definition (losing these edits) or leaves.
  function showConflict(deleted) {
    const reload = h('button', {
      type: 'button', class: 'btn', onclick: () => onReload && onReload(),
    }, 'Load the current version');
    const box = notice('error',
      h('strong', {}, deleted ? `${job.id} was deleted since you opened this form.`
        : `${job.id} was changed by someone else since you opened this form.`),
      ' Your changes were not saved. ',
      deleted ? h('a', { href: '#/jobs' }, 'Back to jobs')
        : ['Load the current version to see it (your edits here are discarded), then make them again. ', reload]);
    box.classList.add('conflict');
    box.id = 'jf-conflict';
    formError.append(box);
    box.setAttribute('tabindex', '-1');
    box.focus();
  }

  const form = h('form', {
    class: 'card job-form', novalidate: true, 'aria-labelledby': 'jf-title',
    onsubmit: async (event) => {
      event.preventDefault();
      clearErrors();
      const { body, problems } = collect(fields, executor, editing);
      if (!editing && !(body.id || '')) problems.unshift(['id', 'id: is required']);
      if (problems.length) {
        showProblems(problems);
        return;
      }
      submit.disabled = true;
      try {
        const saved = editing
          ? await api(`/jobs/${enc(job.id)}`, { method: 'PUT', body, headers: { 'If-Match': etag } })
          : await api('/jobs', { method: 'POST', body });
        toast(`Job ${saved.id} ${editing ? 'saved' : 'created'}`, 'success');
        if (onSaved) onSaved(saved);
      } catch (e) {
        if (e.status === 401) return;
        if (editing && e.status === 412) showConflict(false);
        else if (editing && e.status === 404) showConflict(true);
        else if (e.status === 409 && e.code === 'already_exists') showProblems([['id', shortMessage(e.message)]]);
        else if (e.status === 403 && e.code === 'permission_denied') {
          showProblems([['', `${editing ? 'Changing' : 'Creating'} jobs needs an admin token. (${e.message})`]]);
        } else if (e.status === 400) showProblems([[errorKey(e, keys), shortMessage(e.message)]]);
        else showProblems([['', e.message]]);
      } finally {
        submit.disabled = false;
      }
    },
  });

  const rows = (pred) => fields.filter((f) => pred(f.def)).map((f) => f.row);
  const group = (legend, ...children) => h('fieldset', { class: 'form-group span-2' },
    h('legend', {}, legend), h('div', { class: 'form-grid-inner' }, ...children));
  const basicKeys = ['id', 'description', 'enabled'];
  const policyKeys = ['timeout', 'retries', 'retry_backoff', 'overlap', 'misfire', 'catchup_window', 'on_lost'];
  advanced.append(
    h('summary', {}, 'Advanced: shards, breaker, history, queue, user and limits'),
    h('div', { class: 'form-grid-inner' }, rows((d) => d.advanced)));

  form.append(
    h('h2', { id: 'jf-title', class: 'sr-only' }, editing ? `Edit ${job.id}` : 'New job'),
    group('Job', rows((d) => basicKeys.includes(d.key))),
    group('Schedule', rows((d) => d.key === 'schedule' || d.key === 'timezone'), zoneList()),
    group('What it runs',
      h('div', { class: 'span-2 radios', role: 'radiogroup', 'aria-label': 'Executor' }, radios),
      rows((d) => Boolean(d.executor))),
    group('Window, calendars and jitter', rows((d) => d.group === 'window')),
    group('Jobs it fires, jobs it joins', rows((d) => d.group === 'children')),
    group('Parameters and environment', rows((d) => d.key === 'params' || d.key === 'env')),
    group('Policies', rows((d) => policyKeys.includes(d.key))),
    advanced,
    h('div', { class: 'span-2' }, formError),
    h('div', { class: 'span-2 form-actions' },
      editing ? h('a', { href: `#/jobs/${enc(job.id)}`, class: 'btn btn-ghost' }, 'Cancel') : null,
      submit));

  if (byKey.get('schedule').input.value) readSchedule();
  return {
    element: form,
    focus() {
      // The first input still to fill in.
      const first = editing ? byKey.get('description')
        : ['id', 'schedule', 'command'].map((k) => byKey.get(k)).find((f) => !f.input.value);
      (first || byKey.get('id')).input.focus();
    },
  };
}

// "Delete": a first click asks, naming the job; only the second, explicit "Delete <id>" sends
// DELETE (with If-Match when the version is known), then goes to the jobs list.
export function deleteControl(id, currentEtag) {
  const box = h('div', { class: 'delete-confirm', hidden: true, role: 'group', 'aria-labelledby': 'del-q' });
  const problem = h('p', { class: 'field-error', role: 'alert' });
  const ask = h('button', {
    type: 'button', class: 'btn btn-danger', 'aria-expanded': 'false', 'aria-controls': 'del-confirm',
    onclick: () => open(),
  }, 'Delete…');
  box.id = 'del-confirm';
  const confirm = h('button', {
    type: 'button', class: 'btn btn-danger btn-solid',
    onclick: async () => {
      confirm.disabled = true;
      problem.textContent = '';
      try {
        const etag = currentEtag();
        await api(`/jobs/${enc(id)}`, { method: 'DELETE', headers: etag ? { 'If-Match': etag } : {} });
        toast(`${id} deleted`, 'success');
        location.hash = '#/jobs';
      } catch (e) {
        if (e.status === 412) problem.textContent = `${id} was changed since this page loaded: look at it again before deleting.`;
        else if (e.status !== 401) problem.textContent = e.message;
        confirm.disabled = false;
      }
    },
  }, `Delete ${id}`);
  const keep = h('button', { type: 'button', class: 'btn', onclick: () => close() }, 'Keep it');
  function open() {
    box.hidden = false;
    ask.setAttribute('aria-expanded', 'true');
    keep.focus();
  }
  function close() {
    box.hidden = true;
    problem.textContent = '';
    ask.setAttribute('aria-expanded', 'false');
    ask.focus();
  }
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') close();
  });
  clear(box,
    h('p', { id: 'del-q' }, h('strong', {}, `Delete job ${id}?`),
      ' Every node stops scheduling it; its run history stays in the backend. This cannot be undone.'),
    problem,
    h('div', { class: 'actions' }, confirm, keep));
  return { button: ask, panel: box };
}
