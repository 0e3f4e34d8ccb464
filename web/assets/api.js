// The HTTP API v1 client (docs/http-api.md). The bearer token lives in sessionStorage (gone
// when the tab closes); a 401 answer forgets it and sends the user back to the login page.

const TOKEN_KEY = 'gnomon.token';

let authMode = null; // a promise of "bearer" or "none", from the X-Gnomon-Auth header of the page

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || '';
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// Whether the server wants a token. Asked once with a HEAD of the page (never answers 401).
export async function authRequired() {
  if (authMode === null) {
    // Renders that start while the question is out share its one request.
    authMode = fetch('/', { method: 'HEAD', cache: 'no-store' })
      .then((res) => (res.headers.get('X-Gnomon-Auth') === 'none' ? 'none' : 'bearer'))
      .catch(() => 'bearer');
  }
  return (await authMode) === 'bearer';
}

let unauthorizedHandler = () => {};
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

function queryString(query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

// api('/jobs', {method, body, query, tokenOverride, headers, withEtag}) -> parsed JSON (null for
// 204); with withEtag: {data, etag} (etag: the ETag header, '' when absent). `headers` adds
// request headers (If-Match). Throws ApiError; status 0 means the server could not be reached.
export async function api(path, {
  method = 'GET', body, query, tokenOverride, headers: extra, withEtag = false,
} = {}) {
  const headers = { ...extra, Accept: 'application/json' };
  const bearer = tokenOverride ?? token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(`/api/v1${path}${queryString(query)}`, {
      method, headers, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, 'unreachable', 'Cannot reach the gnomon server.');
  }
  if (res.status === 204) return withEtag ? { data: null, etag: res.headers.get('ETag') || '' } : null;
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (res.ok) return withEtag ? { data, etag: res.headers.get('ETag') || '' } : data;
  const err = (data && data.error) || {};
  const error = new ApiError(res.status, err.code || 'error',
    err.message || `${res.status} ${res.statusText}`, err.field);
  if (res.status === 401 && tokenOverride === undefined) unauthorizedHandler(error);
  throw error;
}

export const enc = encodeURIComponent;

// Follows a server-sent event stream (a GET with the token: EventSource cannot send one), calling
// onEvent(name, data) for each event, until the stream ends or `signal` aborts. Resolves at the
// end; rejects with ApiError when the stream cannot be opened (an abort resolves quietly).
export async function streamEvents(path, { query, signal } = {}, onEvent) {
  const headers = { Accept: 'text/event-stream' };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  try {
    const res = await fetch(`/api/v1${path}${queryString(query)}`, { headers, cache: 'no-store', signal });
    if (!res.ok || !res.body) {
      const error = new ApiError(res.status, 'error', `${res.status} ${res.statusText}`);
      if (res.status === 401) unauthorizedHandler(error);
      throw error;
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      pending += value;
      let end;
      while ((end = pending.indexOf('\n\n')) >= 0) {
        const block = pending.slice(0, end);
        pending = pending.slice(end + 2);
        let name = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) name = line.slice(7);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
        }
        if (data.length) onEvent(name, JSON.parse(data.join('\n')));
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') return;
    throw e instanceof ApiError ? e : new ApiError(0, 'unreachable', 'Cannot reach the gnomon server.');
  }
}
