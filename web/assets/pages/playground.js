// Cron playground: an expression and a zone in, the reading and the next fires out, live as you
// type (the server's parser answers, so what you see is what gnomon will run); then "create a
// job with this schedule" opens the job form (#/new-job) with it.
import { api } from '../api.js';
import { clear, firesList, h, notice, pageHeader } from '../ui.js';

const EXAMPLES = [
  ['*/5 * * * * *', 'every 5 seconds'],
  ['0 9 * * MON-FRI', 'weekdays at 9'],
  ['@daily', 'midnight'],
  ['0 0 L * *', 'last day of month'],
  ['0 30 2 * * SUN#1', 'first Sunday, 02:30:00'],
  ['@every 90s', 'every 90 s (epoch-aligned)'],
  ['H H(0-5) * * *', 'hashed, spread'],
];

function zones() {
  let list = [];
  try {
    list = Intl.supportedValuesOf('timeZone');
  } catch {
    list = [];
  }
  return ['UTC', ...list.filter((z) => z !== 'UTC')];
}

export async function render(root, ctx) {
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  const expr = h('input', {
    id: 'pg-expr', class: 'input input-lg mono', type: 'text', spellcheck: 'false',
    autocomplete: 'off', placeholder: '*/5 * * * *', value: ctx.query.get('expr') || '',
    'aria-describedby': 'pg-expr-help',
  });
  const tz = h('input', {
    id: 'pg-tz', class: 'input', type: 'text', list: 'pg-zones', spellcheck: 'false',
    autocomplete: 'off', value: ctx.query.get('tz') || 'UTC',
  });
  const zoneList = h('datalist', { id: 'pg-zones' }, zones().map((z) => h('option', { value: z })));
  // Exclusions as a job's `exclude` and `calendars` keys take them: excluded fires show struck
  // through among the others.
  const exclude = h('input', {
    id: 'pg-exclude', class: 'input mono', type: 'text', spellcheck: 'false', autocomplete: 'off',
    placeholder: '2026-12-25; 2026-12-31/2027-01-01; * * * * 0,6', value: ctx.query.get('exclude') || '',
    'aria-describedby': 'pg-exclude-help',
  });
  const calendars = h('input', {
    id: 'pg-calendars', class: 'input mono', type: 'text', list: 'pg-calendar-ids', spellcheck: 'false',
    autocomplete: 'off', placeholder: 'cn-holidays', value: ctx.query.get('calendars') || '',
  });
  const calendarList = h('datalist', { id: 'pg-calendar-ids' });
  api('/calendars').then((data) => clear(calendarList,
    data.calendars.map((c) => h('option', { value: c.id }, `${c.id} (${c.entries.length} entries)`))))
    .catch(() => {});
  const reading = h('p', { class: 'reading-lg', id: 'pg-reading', 'aria-live': 'polite' });
  const problem = h('div', { id: 'pg-error', 'aria-live': 'polite' });
  const readingBox = h('div', { class: 'reading-box', hidden: true },
    h('span', { class: 'label' }, 'Reads as'), reading);
  const fires = h('div', { id: 'pg-fires' },
    h('p', { class: 'muted' }, 'Type an expression to see when it fires.'));
  const showIn = h('select', { id: 'pg-show', class: 'input input-small', 'aria-label': 'Show fires in' },
    h('option', { value: 'zone' }, 'in the schedule\'s zone'),
    h('option', { value: 'local' }, `in your zone (${browserZone})`),
    h('option', { value: 'UTC' }, 'in UTC'));
  let latest = null; // the last successful preview
  let seq = 0;

  function drawFires() {
    if (!latest) return;
    const zone = showIn.value === 'zone' ? latest.timezone
      : showIn.value === 'local' ? browserZone : 'UTC';
    clear(fires, latest.next.length || latest.excluded.length
      ? firesList(latest.next, latest.excluded, zone, 'Next fires')
      : notice('info', 'Valid, but it never fires (nothing within 100 years).'));
  }

  async function preview() {
    const text = expr.value.trim();
    const mine = ++seq;
    sync();
    if (!text) {
      latest = null;
      reading.textContent = '';
      readingBox.hidden = true;
      problem.replaceChildren();
      clear(fires, h('p', { class: 'muted' }, 'Type an expression to see when it fires.'));
      expr.removeAttribute('aria-invalid');
      return;
    }
    try {
      const data = await api('/cron/preview', {
        query: {
          expr: text, tz: tz.value.trim() || 'UTC', n: 10, job: jobId.value.trim() || undefined,
          exclude: exclude.value.trim() || undefined, calendars: calendars.value.trim() || undefined,
        },
      });
      if (mine !== seq) return;
      latest = data;
      reading.textContent = data.description;
      readingBox.hidden = false;
      problem.replaceChildren();
      expr.removeAttribute('aria-invalid');
      tz.removeAttribute('aria-invalid');
      drawFires();
    } catch (e) {
      if (mine !== seq || e.status === 401) return;
      latest = null;
      reading.textContent = '';
      readingBox.hidden = true;
      const field = { tz, exclude, calendars }[e.field] || expr;
      field.setAttribute('aria-invalid', 'true');
      problem.replaceChildren(notice('error', e.message));
      clear(fires, h('p', { class: 'muted' }, 'Fix the expression to see its fires.'));
    }
  }

  let timer = null;
  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(preview, 120);
  };
  ctx.onLeave(() => clearTimeout(timer));

  // ----------------------------------------------------------------- create a job --
  // The job form (#/new-job) opens with this schedule, zone and id filled in.
  const jobId = h('input', {
    id: 'pg-job', class: 'input mono', type: 'text', maxlength: 128, placeholder: 'nightly-report',
    spellcheck: 'false', autocomplete: 'off', 'aria-describedby': 'pg-job-help',
  });
  const summary = h('p', { class: 'muted small' });
  const createLink = h('a', { class: 'btn btn-primary', href: '#/new-job' }, 'Create a job with this schedule');

  function sync() {
    const text = expr.value.trim();
    const zone = tz.value.trim() || 'UTC';
    clear(summary, text
      ? ['Schedule ', h('code', { class: 'mono' }, text), ' in ', h('strong', {}, zone),
        '. Every node computes the same fires; one node runs each.']
      : 'Type a schedule above first.');
    const query = new URLSearchParams();
    if (text) query.set('schedule', text);
    query.set('tz', zone);
    if (jobId.value.trim()) query.set('id', jobId.value.trim());
    createLink.setAttribute('href', `#/new-job?${query}`);
  }

  const form = h('section', { class: 'card form-grid', 'aria-labelledby': 'create-title' },
    h('h2', { id: 'create-title', class: 'span-2' }, 'Create a job from this schedule'),
    h('div', { class: 'span-2' }, summary),
    h('div', { class: 'field' }, h('label', { for: 'pg-job', class: 'label' }, 'Job id (seeds H)'), jobId,
      h('p', { class: 'hint', id: 'pg-job-help' }, 'Optional here: ', h('code', {}, 'H'),
        ' picks its values from a hash of the job id.')),
    h('div', { class: 'span-2 form-actions' }, createLink));

  expr.addEventListener('input', schedule);
  tz.addEventListener('input', schedule);
  exclude.addEventListener('input', schedule);
  calendars.addEventListener('input', schedule);
  jobId.addEventListener('input', () => {
    sync();
    if (/\bH\b/.test(expr.value)) schedule();
  });
  tz.addEventListener('input', sync);
  showIn.addEventListener('change', drawFires);

  root.append(
    pageHeader('Cron playground',
      'Type a schedule: gnomon\'s own parser explains it and lists the next fires as you type.'),
    h('div', { class: 'grid-2 playground' },
      h('section', { class: 'card', 'aria-labelledby': 'pg-title' },
        h('h2', { id: 'pg-title' }, 'Schedule'),
        h('label', { for: 'pg-expr', class: 'label' }, 'Cron expression'),
        expr,
        problem,
        h('p', { class: 'hint', id: 'pg-expr-help' },
          '5, 6 (with seconds) or 7 (with year) fields; ', h('code', {}, 'L W # H ?'),
          ', names, ', h('code', {}, '@daily'), ', ', h('code', {}, '@every 90s'), '.'),
        h('label', { for: 'pg-tz', class: 'label' }, 'Time zone'),
        tz, zoneList,
        h('label', { for: 'pg-exclude', class: 'label' }, 'Exclude (optional)'),
        exclude,
        h('p', { class: 'hint', id: 'pg-exclude-help' }, 'Dates, ranges ', h('code', {}, '2026-12-24/2026-12-26'),
          ' or cron expressions, separated by ', h('code', {}, ';'), ', in the schedule\'s zone.'),
        h('label', { for: 'pg-calendars', class: 'label' }, 'Calendars (optional)'),
        calendars, calendarList,
        h('div', { class: 'examples', role: 'group', 'aria-label': 'Examples' },
          EXAMPLES.map(([e, label]) => h('button', {
            type: 'button', class: 'chip chip-button', title: label, 'aria-label': `Use example ${e} (${label})`,
            onclick: () => {
              expr.value = e;
              preview();
              expr.focus();
            },
          }, h('code', { class: 'mono' }, e)))),
        readingBox),
      h('section', { class: 'card', 'aria-labelledby': 'pg-fires-title' },
        h('div', { class: 'section-head' }, h('h2', { id: 'pg-fires-title' }, 'Next 10 fires'), showIn),
        fires)),
    form);
  sync();
  if (expr.value) await preview();
  else expr.focus();
}
