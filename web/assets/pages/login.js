// Token login: the token is checked against the API before it is kept (sessionStorage).
import { api, setToken } from '../api.js';
import { h, notice } from '../ui.js';

export async function render(root, ctx) {
  const next = ctx.query.get('next') || '#/jobs';
  const error = h('div', { class: 'form-error', 'aria-live': 'assertive' });
  const input = h('input', {
    id: 'login-token', name: 'token', type: 'password', class: 'input mono', required: true,
    autocomplete: 'current-password', spellcheck: 'false', placeholder: 'paste your API token',
  });
  const button = h('button', { type: 'submit', class: 'btn btn-primary btn-block' }, 'Sign in');

  const form = h('form', {
    class: 'login-card card', 'aria-labelledby': 'login-title',
    onsubmit: async (event) => {
      event.preventDefault();
      const value = input.value.trim();
      error.replaceChildren();
      if (!value) {
        error.append(notice('error', 'Enter a token.'));
        return;
      }
      button.disabled = true;
      button.textContent = 'Checking…';
      try {
        await api('/jobs', { tokenOverride: value });
        setToken(value);
        location.replace(next.startsWith('#/') && !next.startsWith('#/login') ? next : '#/jobs');
      } catch (e) {
        const text = e.status === 401 ? 'This token was not accepted by the server.'
          : e.status === 403 ? 'This token may not list jobs.' : e.message;
        error.append(notice('error', text));
        input.select();
      } finally {
        button.disabled = false;
        button.textContent = 'Sign in';
      }
    },
  },
  h('div', { class: 'login-mark', 'aria-hidden': 'true' }),
  h('h1', { id: 'login-title' }, 'Sign in to gnomon'),
  h('p', { class: 'muted' },
    'Use a bearer token from a ', h('code', {}, '[[token]]'), ' table of the server\'s config, or ',
    'the generated admin token (', h('code', {}, 'gnomon-data/admin.token'), '; the server logs a ',
    'sign-in link at start). It is kept in this browser tab only.'),
  // Password managers (and Chromium's form checks) expect a user name beside a password field.
  h('input', {
    type: 'text', name: 'username', autocomplete: 'username', value: 'api-token', hidden: true,
    'aria-hidden': 'true', tabindex: '-1',
  }),
  h('label', { for: 'login-token', class: 'label' }, 'API token'),
  input,
  error,
  button);
  root.append(h('div', { class: 'login-wrap' }, form));
  input.focus();
}
