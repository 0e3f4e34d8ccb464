// The dashboard shell: hash routing, the session (token) area and page lifecycles.
// Each page module exports render(root, ctx) and may register timers and cleanups on ctx.
import { authRequired, onUnauthorized, setToken, token } from './api.js';
import { clear, h, notice, toast } from './ui.js';
import * as audit from './pages/audit.js';
import * as job from './pages/job.js';
import * as jobEdit from './pages/job_edit.js';
import * as jobs from './pages/jobs.js';
import * as login from './pages/login.js';
import * as nodes from './pages/nodes.js';
import * as playground from './pages/playground.js';
import * as runs from './pages/runs.js';

const routes = [
  { pattern: /^\/login$/, page: login, nav: null, title: 'Sign in', public: true },
  { pattern: /^\/jobs$/, page: jobs, nav: 'jobs', title: 'Jobs' },
  { pattern: /^\/new-job$/, page: { render: jobEdit.renderNew }, nav: 'jobs', title: 'New job' },
  { pattern: /^\/jobs\/([^/]+)$/, page: job, nav: 'jobs', title: 'Job' },
  { pattern: /^\/jobs\/([^/]+)\/edit$/, page: { render: jobEdit.renderEdit }, nav: 'jobs', title: 'Edit job' },
  { pattern: /^\/runs$/, page: runs, nav: 'runs', title: 'Runs' },
  { pattern: /^\/nodes$/, page: nodes, nav: 'nodes', title: 'Nodes' },
  { pattern: /^\/playground$/, page: playground, nav: 'playground', title: 'Cron playground' },
  { pattern: /^\/audit$/, page: audit, nav: 'audit', title: 'Audit log' },
];

let current = null; // { cleanups: [] } of the page on screen
// Each render takes the next number; one that finds a newer number after an await was overtaken
// by a later navigation and draws nothing (its page would cover the one the user went to).
let renderSeq = 0;

// "#/jobs/x?y=1" -> { path: "/jobs/x", query: URLSearchParams }
function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/jobs';
  const [path, search = ''] = raw.split('?');
  return { path: path || '/jobs', query: new URLSearchParams(search) };
}

export function navigate(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

function teardown() {
  if (!current) return;
  current.left = true;
  for (const fn of current.cleanups) {
    try {
      fn();
    } catch {
      // A cleanup must not stop the next page.
    }
  }
  current = null;
}

function renderSession(needsToken) {
  const box = document.getElementById('session');
  if (!needsToken) {
    clear(box, h('span', { class: 'chip chip-open', title: 'This server runs with [api] auth = "none"' },
      'No authentication'));
  } else if (token()) {
    clear(box,
      h('span', { class: 'chip', title: 'Token kept in this tab only (sessionStorage)' }, 'Signed in'),
      h('button', {
        type: 'button', class: 'btn btn-ghost btn-small', 'aria-label': 'Sign out',
        onclick: () => {
          setToken('');
          toast('Signed out');
          navigate('#/login');
        },
      }, 'Sign out'));
  } else {
    clear(box);
  }
}

// The sign-in link `gnomon serve` prints for its generated admin token: /#token=<secret>. The
// token goes to sessionStorage and leaves the address bar and the history at once.
function takeTokenFromLink() {
  const m = location.hash.match(/^#token=([A-Za-z0-9_.~-]{16,4096})$/);
  if (!m) return;
  setToken(m[1]);
  history.replaceState(null, '', `${location.pathname}${location.search}#/jobs`);
}

async function render() {
  const seq = ++renderSeq;
  teardown();
  takeTokenFromLink();
  if (!location.hash || location.hash === '#' || location.hash === '#/') {
    location.replace('#/jobs'); // fires hashchange, which renders
    return;
  }
  const { path, query } = parseHash();
  const main = document.getElementById('main');
  const needsToken = await authRequired();
  if (seq !== renderSeq) return;
  renderSession(needsToken);

  let route = routes.find((r) => r.pattern.test(path));
  const params = route ? path.match(route.pattern).slice(1).map(decodeURIComponent) : [];
  if (route && !route.public && needsToken && !token()) {
    location.replace(`#/login?next=${encodeURIComponent(location.hash || '#/jobs')}`);
    return;
  }
  if (route === routes[0] && !needsToken) {
    location.replace('#/jobs');
    return;
  }

  for (const a of document.querySelectorAll('[data-nav]')) {
    const active = route && a.dataset.nav === route.nav;
    a.classList.toggle('active', active);
    if (active) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.body.classList.toggle('is-login', route === routes[0]);

  const page = h('div', { class: 'page' });
  clear(main, page);
  const ctx = {
    params, query, needsToken, cleanups: [], left: false,
    // A repeating refresh owned by the page: stopped when the user leaves it. A page that is
    // left while it still loads starts none (its cleanups already ran).
    every(ms, fn) {
      if (this.left) return;
      const id = setInterval(() => {
        if (!document.hidden) fn();
      }, ms);
      this.cleanups.push(() => clearInterval(id));
    },
    onLeave(fn) {
      if (this.left) fn();
      else this.cleanups.push(fn);
    },
    setTitle(title) {
      document.title = `${title} · gnomon`;
    },
  };
  current = ctx;
  if (!route) {
    ctx.setTitle('Not found');
    page.append(notice('warn', 'No such page. ', h('a', { href: '#/jobs' }, 'Back to jobs')));
    return;
  }
  ctx.setTitle(route.title);
  try {
    await route.page.render(page, ctx);
  } catch (e) {
    if (e && e.status === 401) return; // already on the way to the login page
    page.append(notice('error', e && e.message ? e.message : String(e)));
  }
}

onUnauthorized(() => {
  setToken('');
  const { path } = parseHash();
  if (path === '/login') return;
  toast('Your token was rejected or has expired. Please sign in again.', 'error');
  location.replace(`#/login?next=${encodeURIComponent(location.hash || '#/jobs')}`);
});

window.addEventListener('hashchange', () => {
  render();
  document.getElementById('main').focus({ preventScroll: true });
});
window.addEventListener('unhandledrejection', (event) => {
  // Errors are shown on the page; 401s already redirect to the login page.
  if (event.reason && event.reason.status !== undefined) event.preventDefault();
});
render();
