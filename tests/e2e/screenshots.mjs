// Screenshots of every dashboard page for docs/img (README): two `gnomon serve` nodes on one
// SQLite file with examples/jobs.toml plus a few jobs that run often, so the pages show real runs.
//   node tests/e2e/screenshots.mjs [out dir, default docs/img]   (GNOMON_BIN: the binary)
// Not a test: run by hand (make screenshots) when the dashboard changes.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gnomonBin, launchBrowser, repoRoot, waitFor } from './harness.mjs';

const out = path.resolve(process.argv[2] || path.join(repoRoot, 'docs', 'img'));
mkdirSync(out, { recursive: true });
const dir = mkdtempSync(path.join(os.tmpdir(), 'gnomon-shots-'));
mkdirSync(path.join(dir, 'gnomon-data')); // the example jobs look at ./gnomon-data, as under make run
const TOKEN = 'screenshots-admin-token-0123456789';
writeFileSync(path.join(dir, 'gnomon.toml'), [
  '[scheduler]', 'heartbeat_interval = "500ms"', '',
  '[[token]]', 'name = "ops-admin"', `token = "${TOKEN}"`, 'role = "admin"', '',
  '[[policy]]', 'allow_root = true', '',
].join('\n'));
writeFileSync(path.join(dir, 'more.toml'), `
[[job]]
id = "invoice-export"
description = "Every 15 seconds: export new invoices to the ledger"
schedule = "*/15 * * * * *"
command = "echo exported $(od -An -N1 -tu1 /dev/urandom) invoices; sleep 1"

[[job]]
id = "cache-warmup"
description = "Every 20 seconds; fails now and then (retried)"
schedule = "*/20 * * * * *"
command = "echo warming; [ $(od -An -N1 -tu1 /dev/urandom) -gt 90 ]"
retries = 1
retry_backoff = "1s"

[[job]]
id = "report-build"
description = "Builds the monthly report (triggered by hand; prints as it goes)"
schedule = "0 6 1 * *"
command = "for i in $(seq 1 90); do echo \\"step $i of 90: rendered section $i\\"; sleep 1; done"
`);
const port = 18000 + Math.floor(Math.random() * 2000);
const procs = [];
for (const [node, listen] of [['node-a', port], ['node-b', port + 1]]) {
  const log = openSync(path.join(dir, `${node}.log`), 'w');
  procs.push(spawn(gnomonBin(), ['serve', '--config', path.join(dir, 'gnomon.toml'),
    '--backend', `sqlite://${dir}/gnomon.db`, '--node-id', node, '--listen', `127.0.0.1:${listen}`,
    '--jobs', path.join(repoRoot, 'examples', 'jobs.toml'), '--jobs', path.join(dir, 'more.toml')],
  { stdio: ['ignore', log, log], cwd: dir }));
}
const url = `http://127.0.0.1:${port}`;
const auth = { Authorization: `Bearer ${TOKEN}` };
try {
  await waitFor('serve', async () => (await fetch(`${url}/healthz`).catch(() => ({ ok: false }))).ok, 30000);
  // Some history: a minute of runs, a few triggers, a pause (for the audit log).
  for (const job of ['monthly-settlement', 'disk-report', 'nightly-cleanup']) {
    await fetch(`${url}/api/v1/jobs/${job}/trigger`, { method: 'POST', headers: auth });
  }
  await new Promise((r) => setTimeout(r, 60000));
  await fetch(`${url}/api/v1/jobs/nightly-cleanup/pause`, { method: 'POST', headers: auth });
  const report = await (await fetch(`${url}/api/v1/jobs/report-build/trigger`, { method: 'POST', headers: auth })).json();
  const browser = await launchBrowser();
  const page = await browser.context.newPage();
  await page.goto(`${url}/#/login`);
  await page.waitForTimeout(1000);
  await page.screenshot({ path: path.join(out, 'login.png') });
  await page.evaluate((t) => sessionStorage.setItem('gnomon.token', t), TOKEN);
  const shots = [
    ['#/jobs', 'jobs'], ['#/jobs/invoice-export', 'job'], ['#/runs', 'runs'],
    ['#/nodes', 'nodes'], ['#/playground', 'playground'], ['#/audit', 'audit'],
    ['#/new-job', 'job-form'],
  ];
  for (const [hash, name] of shots) {
    await page.goto(`${url}/${hash}`);
    await page.waitForTimeout(1500);
    await page.screenshot({ path: path.join(out, `${name}.png`), fullPage: true });
  }
  // A running run's output, followed live.
  await page.goto(`${url}/#/jobs/report-build`);
  await page.getByRole('button', { name: `Output of ${report.run_id} attempt 1` }).click();
  await page.waitForTimeout(4000);
  await page.evaluate(() => window.scrollTo(0, 0)); // the sticky header at the top of the shot
  await page.screenshot({ path: path.join(out, 'live-output.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [hash, name] of [['#/jobs', 'jobs-phone'], ['#/jobs/invoice-export', 'job-phone']]) {
    await page.goto(`${url}/${hash}`);
    await page.waitForTimeout(1500);
    await page.screenshot({ path: path.join(out, `${name}.png`), fullPage: false });
  }
  await browser.close();
  console.log(`screenshots in ${out}`);
} finally {
  for (const p of procs) p.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 2000));
  rmSync(dir, { recursive: true, force: true });
}
