// A page of another origin, open in the operator's browser, tries every trick a page has to create
// and run a job on a gnomon server (docs/reliability.md "Attacks on the control plane"): simple
// requests (text/plain and form bodies, no-cors fetches, beacons), HTML forms (one with a body
// crafted to parse as JSON), a CORS request with a JSON body, and DNS rebinding (a name of the
// attacker's that resolves to the server, so the page is "same-origin" with it). The server runs
// with `[api] auth = "none"`, the setting where nothing but these checks stands in the way.
// Nothing may be created, triggered or even read.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { freePort, launchBrowser, startServer, waitFor } from './harness.mjs';

const EVIL = { id: 'evil', schedule: '@yearly', command: 'touch /tmp/gnomon-e2e-pwned' };

// The attacker's page: every request it can make, then a report in document.title.
function attackPage(target) {
  const body = JSON.stringify(EVIL);
  // A text/plain form whose single field renders as a JSON document: name + "=" + value.
  const name = body.slice(0, -1) + ', "pad": "';
  return `<!doctype html><html><body>
<iframe name="sink" style="display:none"></iframe>
<form id="plain" method="POST" action="${target}/api/v1/jobs" enctype="text/plain" target="sink">
  <input type="hidden" name='${name}' value='"}'>
</form>
<form id="urlenc" method="POST" action="${target}/api/v1/jobs/victim/trigger" target="sink">
  <input type="hidden" name="x" value="y">
</form>
<img src="${target}/api/v1/jobs/victim/trigger">
<script>
const target = ${JSON.stringify(target)};
const body = ${JSON.stringify(body)};
const leaks = [];
async function attempt(label, fn) {
  try {
    const res = await fn();
    // A readable answer is a leak (no-cors answers are opaque: status 0, no body).
    if (res && res.type !== 'opaque' && res.status) leaks.push(label + ':' + res.status + ':' + (await res.text()).slice(0, 80));
  } catch (e) { /* refused by the browser: fine */ }
}
(async () => {
  await attempt('text-plain', () => fetch(target + '/api/v1/jobs', { method: 'POST', mode: 'no-cors', body }));
  await attempt('form-type', () => fetch(target + '/api/v1/jobs', { method: 'POST', mode: 'no-cors',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body }));
  await attempt('no-body-trigger', () => fetch(target + '/api/v1/jobs/victim/trigger', { method: 'POST', mode: 'no-cors' }));
  await attempt('cors-json', () => fetch(target + '/api/v1/jobs', { method: 'POST',
    headers: { 'Content-Type': 'application/json' }, body }));
  await attempt('cors-read', () => fetch(target + '/api/v1/jobs'));
  navigator.sendBeacon(target + '/api/v1/jobs', new Blob([body], { type: 'text/plain' }));
  navigator.sendBeacon(target + '/api/v1/jobs/victim/trigger');
  await new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', target + '/api/v1/jobs');
    xhr.withCredentials = true;
    xhr.onloadend = resolve;
    xhr.send(body);
  });
  document.getElementById('plain').submit();
  await new Promise((r) => setTimeout(r, 300));
  document.getElementById('urlenc').submit();
  await new Promise((r) => setTimeout(r, 300));
  document.title = 'done ' + JSON.stringify(leaks);
})();
</script></body></html>`;
}

// DNS rebinding: the page is (as far as the browser knows) served by http://rebind.test:<port>,
// the server's own port, so its requests are same-origin; only the Host header gives it away.
function rebindPage() {
  const body = JSON.stringify(EVIL);
  return `<!doctype html><html><body><script>
(async () => {
  const out = [];
  for (const [path, init] of [['/api/v1/jobs', {}],
      ['/api/v1/jobs', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: ${JSON.stringify(body)} }],
      ['/api/v1/jobs/victim/trigger', { method: 'POST' }]]) {
    try {
      const res = await fetch(path, init);
      out.push(res.status);
    } catch (e) { out.push('error'); }
  }
  document.title = 'done ' + JSON.stringify(out);
})();
</script></body></html>`;
}

describe('pages of other origins', () => {
  let server;
  let browser;
  let attacker;
  let attackerUrl;

  before(async () => {
    server = await startServer({
      tokens: false,
      config: ['[[job]]', 'id = "victim"', 'schedule = "@yearly"', 'command = "true"', ''],
    });
    const port = await freePort();
    attacker = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(attackPage(server.url));
    });
    await new Promise((resolve) => attacker.listen(port, '127.0.0.1', resolve));
    attackerUrl = `http://localhost:${port}/`;
    const gnomonPort = new URL(server.url).port;
    // rebind.test resolves to this host. Chromium's own guard for pages of public origins that
    // reach loopback (Private Network Access) is turned off: the test is of gnomon's defence, as
    // a browser without that guard would meet it.
    browser = await launchBrowser({
      extraArgs: ['--host-resolver-rules=MAP rebind.test 127.0.0.1',
        '--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,'
        + 'PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks'],
    });
    browser.gnomonPort = gnomonPort;
  });

  after(async () => {
    if (browser) await browser.close();
    if (attacker) attacker.close();
    if (server) await server.stop();
  });

  async function jobsAndRuns() {
    const jobs = await (await fetch(`${server.url}/api/v1/jobs`)).json();
    const runs = await (await fetch(`${server.url}/api/v1/runs?job=victim`)).json();
    return { ids: jobs.jobs.map((j) => j.id), runs: runs.runs.length };
  }

  test('simple requests, forms, beacons and CORS requests create and run nothing', async () => {
    const page = await browser.context.newPage();
    await page.goto(attackerUrl);
    await waitFor('the attack page to finish', async () => (await page.title()).startsWith('done'), 20000);
    const leaks = JSON.parse((await page.title()).slice(5));
    assert.deepEqual(leaks, [], 'a cross-origin page read an answer');
    await new Promise((r) => setTimeout(r, 500)); // beacons are sent after the page goes on
    const state = await jobsAndRuns();
    assert.deepEqual(state.ids, ['victim']);
    assert.equal(state.runs, 0);
    // The same body from a client without an Origin (the CLI, curl) is accepted: the refusals
    // above are the cross-site checks, not a broken request.
    const control = await fetch(`${server.url}/api/v1/jobs`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...EVIL, id: 'control', command: 'true' }),
    });
    assert.equal(control.status, 201);
    await page.close();
  });

  test('DNS rebinding: a foreign name for this server is refused', async () => {
    const page = await browser.context.newPage();
    const origin = `http://rebind.test:${browser.gnomonPort}`;
    // The first load is the attacker's server; then the name "resolves" to gnomon.
    await page.route(`${origin}/`, (route) => route.fulfill({ contentType: 'text/html', body: rebindPage() }));
    await page.goto(`${origin}/`);
    await waitFor('the rebinding page to finish', async () => (await page.title()).startsWith('done'), 20000);
    const statuses = JSON.parse((await page.title()).slice(5));
    assert.deepEqual(statuses, [421, 421, 421]);
    const state = await jobsAndRuns();
    assert.ok(!state.ids.includes('evil'));
    assert.equal(state.runs, 0);
    await page.close();
  });
});
