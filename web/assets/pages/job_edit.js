// "New job" (#/new-job?schedule=&tz=&id=, prefilled from the cron playground) and "Edit job"
// (#/jobs/{id}/edit): the job form of ../job_form.js. An edit starts from the definition and
// version of GET /api/v1/jobs/{id} and sends that version as If-Match, so a change made meanwhile
// by someone else is a conflict shown on the form, never overwritten. Jobs from a config file
// (read_only) have no form: the page says where to change them.
import { api, enc } from '../api.js';
import { createJobForm, deleteControl } from '../job_form.js';
import { clear, h, notice, pageHeader } from '../ui.js';

export async function renderNew(root, ctx) {
  const form = createJobForm({
    prefill: {
      id: ctx.query.get('id') || '', schedule: ctx.query.get('schedule') || '',
      timezone: ctx.query.get('tz') || '',
    },
    onSaved: (job) => {
      location.hash = `#/jobs/${enc(job.id)}`;
    },
  });
  root.append(
    pageHeader('New job', 'Every key of a jobs file; empty inputs take the server\'s defaults.',
      h('a', { href: '#/playground', class: 'btn btn-ghost' }, 'Try a schedule in the playground')),
    form.element);
  form.focus();
}

export async function renderEdit(root, ctx) {
  const [id] = ctx.params;
  ctx.setTitle(`Edit ${id}`);
  let etag = '';
  const body = h('div');
  const del = deleteControl(id, () => etag);
  root.append(h('div', { class: 'page-header' },
    h('div', {},
      h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ',
        h('a', { href: `#/jobs/${enc(id)}`, class: 'mono' }, id), ' / '),
      h('h1', {}, 'Edit ', h('span', { class: 'mono job-title' }, id))),
    h('div', { class: 'actions' }, del.button)),
  del.panel, body);

  async function load() {
    let answer;
    try {
      answer = await api(`/jobs/${enc(id)}`, { withEtag: true });
    } catch (e) {
      if (e.status === 404) {
        clear(body, notice('warn', `No job "${id}". `, h('a', { href: '#/jobs' }, 'Back to jobs')));
        del.button.hidden = true;
        return;
      }
      throw e;
    }
    const job = answer.data;
    etag = answer.etag || (job.version ? `"${job.version}"` : '');
    if (job.read_only) {
      del.button.hidden = true;
      clear(body, readOnlyNotice(job));
      return;
    }
    const form = createJobForm({
      job, etag,
      onSaved: () => {
        location.hash = `#/jobs/${enc(id)}`;
      },
      onReload: async () => {
        await load();
      },
    });
    clear(body, h('p', { class: 'muted small', id: 'jf-version' },
      `Editing version ${job.version}. Saving replaces the whole definition; empty inputs take the defaults.`),
    form.element);
    form.focus();
  }
  await load();
}

// Why a job has no edit or delete: where it is defined and how to change it.
export function readOnlyNotice(job) {
  const where = job.source && job.source !== 'api' ? job.source : 'a config file';
  return notice('info', h('strong', {}, 'Read-only here. '),
    `${job.id} is defined in ${where}, not through the API, so the dashboard cannot edit or `
    + 'delete it: change the file and reload the daemon (SIGHUP).');
}
