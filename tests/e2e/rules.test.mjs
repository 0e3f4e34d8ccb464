// Windows, calendars, jitter and chains in a real browser against a real `gnomon serve` with a
// `[[calendar]]`: the job page shows the window, the exclusions and the jitter, and strikes
// through the excluded fires among its next ones; the cron playground does the same for an
// expression with exclusions and a calendar; the job form keeps all of them when it edits; a
// child job runs at its parent's instant and both job pages show the chain.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  launchBrowser, resultsDir, startServer, waitFor, watchConsole,
} from './harness.mjs';

const STEP_TIMEOUT = 15000;
const DAY = 24 * 3600 * 1000;
// UTC dates of the days after today, as YYYY-MM-DD.
const dayAfter = (n) => new Date(Date.now() + n * DAY).toISOString().slice(0, 10);

describe('windows, calendars and jitter', () => {
  let server;
  let browser;
  let page;
  let consoleLog;

  before(async () => {
    server = await startServer({
      tokens: false,
      config: ['[[calendar]]', 'id = "closures"', `dates = ["2030-01-02", "${dayAfter(3)}"]`, ''],
    });
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    consoleLog = watchConsole(page);
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) await server.stop();
  });

  // Creates a job through the API (the server has no tokens).
  async function createJob(definition) {
    const res = await fetch(`${server.url}/api/v1/jobs`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(definition),
    });
    assert.equal(res.status, 201, await res.text());
  }

  test('the job page shows the window, the exclusions and the jitter', async () => {
    await createJob({
      id: 'rules-e2e', schedule: '0 0 9 * * *', command: 'true', start_at: '2030-01-01T00:00:00Z',
      max_runs: 3, exclude: ['2030-01-03'], calendars: ['closures'], jitter: '10m',
    });
    await page.goto(`${server.url}/#/jobs/rules-e2e`);
    await page.locator('#job-window').waitFor();
    assert.equal(await page.locator('#job-window').textContent(), 'not started');
    const definition = (await page.locator('.definition').textContent()) || '';
    assert.match(definition, /at most 3 fires/);
    assert.match(definition, /2030-01-03/);
    assert.match(definition, /calendar closures/);
    assert.match(definition, /up to 10m after each instant/);
    // The window's 3 fires (Jan 1, 4, 5), with Jan 2 (the calendar) and 3 struck through.
    const list = page.locator('ol[aria-label="Next 3 fires of rules-e2e"]');
    await list.waitFor();
    const items = await list.locator('li').evaluateAll((nodes) => nodes.map((n) => ({
      at: n.querySelector('time').getAttribute('datetime'),
      out: n.classList.contains('fire-excluded'),
      struck: n.querySelector('s') !== null,
    })));
    assert.deepEqual(items, [
      { at: '2030-01-01T09:00:00Z', out: false, struck: false },
      { at: '2030-01-02T09:00:00Z', out: true, struck: true },
      { at: '2030-01-03T09:00:00Z', out: true, struck: true },
      { at: '2030-01-04T09:00:00Z', out: false, struck: false },
      { at: '2030-01-05T09:00:00Z', out: false, struck: false },
    ]);
    await page.screenshot({ path: path.join(resultsDir, 'job-rules-1280.png'), fullPage: true });
  });

  test('an ended window says so', async () => {
    await createJob({ id: 'ended-e2e', schedule: '@daily', command: 'true', end_at: '2020-01-01T00:00:00Z' });
    await page.goto(`${server.url}/#/jobs/ended-e2e`);
    await page.locator('#job-window').waitFor();
    assert.equal(await page.locator('#job-window').textContent(), 'ended');
    await waitFor('the ended notice', async () => /window has ended/.test(
      (await page.locator('main').textContent()) || ''), STEP_TIMEOUT);
  });

  test('the playground strikes through the fires that exclusions leave out', async () => {
    await page.goto(`${server.url}/#/playground`);
    await page.getByLabel('Cron expression').fill('0 0 9 * * *');
    await page.getByLabel('Exclude (optional)').fill(dayAfter(2));
    await page.getByLabel('Calendars (optional)').fill('closures');
    await waitFor('two struck-through fires', async () => (
      await page.locator('#pg-fires li.fire-excluded s').count()) === 2, STEP_TIMEOUT);
    const struck = await page.locator('#pg-fires li.fire-excluded time').evaluateAll(
      (nodes) => nodes.map((n) => n.getAttribute('datetime').slice(0, 10)));
    assert.deepEqual(struck, [dayAfter(2), dayAfter(3)]);
    assert.equal(await page.locator('#pg-fires li:not(.fire-excluded)').count(), 10);
    // An unknown calendar is named next to the field.
    await page.getByLabel('Calendars (optional)').fill('nope');
    await waitFor('the calendar error', async () => /"nope" is not defined/.test(
      (await page.locator('#pg-error').textContent()) || ''), STEP_TIMEOUT);
    assert.equal(await page.getByLabel('Calendars (optional)').getAttribute('aria-invalid'), 'true');
    await page.screenshot({ path: path.join(resultsDir, 'playground-rules-1280.png'), fullPage: true });
  });

  test('the job form keeps the rules and the children of a job it edits', async () => {
    await page.goto(`${server.url}/#/jobs/rules-e2e/edit`);
    await page.getByLabel('Description', { exact: true }).waitFor();
    assert.equal(await page.getByLabel('Excluded', { exact: true }).inputValue(), '2030-01-03');
    assert.equal(await page.getByLabel('Calendars', { exact: true }).inputValue(), 'closures');
    await page.getByLabel('Description', { exact: true }).fill('edited with its rules');
    await page.getByLabel('On failure, fire', { exact: true }).fill('ended-e2e');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForURL(/#\/jobs\/rules-e2e$/);
    const res = await fetch(`${server.url}/api/v1/jobs/rules-e2e`);
    const { spec } = await res.json();
    assert.equal(spec.description, 'edited with its rules');
    assert.equal(spec.start_at, '2030-01-01T00:00:00.000Z');
    assert.equal(spec.max_runs, 3);
    assert.deepEqual(spec.exclude, ['2030-01-03']);
    assert.deepEqual(spec.calendars, ['closures']);
    assert.equal(spec.jitter, '10m');
    assert.deepEqual(spec.on_failure, ['ended-e2e']);
  });

  test('a chain: the child runs at its parent\'s instant, and each job page shows the chain', async () => {
    await createJob({ id: 'chain-load', command: 'echo loaded' });  // no schedule: a child only
    await createJob({ id: 'chain-extract', schedule: '@yearly', command: 'true', on_success: ['chain-load'] });
    const trigger = await fetch(`${server.url}/api/v1/jobs/chain-extract/trigger`, { method: 'POST' });
    assert.equal(trigger.status, 202);
    const { run_id: parentRun } = await trigger.json();
    const instant = parentRun.slice(parentRun.indexOf('@'));
    let child;
    await waitFor('the child\'s run', async () => {
      const { runs } = await (await fetch(`${server.url}/api/v1/runs?job=chain-load`)).json();
      child = runs.find((r) => r.outcome === 'succeeded');
      return Boolean(child);
    }, STEP_TIMEOUT);
    assert.equal(child.run_id, `chain-load${instant}`, 'the parent fire\'s instant');
    assert.equal(child.cause, `after ${parentRun} succeeded`);

    await page.goto(`${server.url}/#/jobs/chain-load`);
    await page.locator('#job-chain').waitFor();
    assert.deepEqual(await page.locator('#job-chain a').allTextContents(), ['chain-extract']);
    assert.match((await page.locator('.definition').textContent()) || '', /none: it fires as a child/);
    await page.locator('#job-chain a', { hasText: 'chain-extract' }).click();
    await page.waitForURL(/#\/jobs\/chain-extract$/);
    await page.locator('#job-chain').waitFor();
    assert.match((await page.locator('#job-chain').textContent()) || '', /chain-load on success/);
    await page.screenshot({ path: path.join(resultsDir, 'job-chain-1280.png'), fullPage: true });
  });

  test('had no console errors', () => {
    assert.deepEqual(consoleLog.errors, []);
    const unexpected = consoleLog.network.filter((l) => !/status of 400 .*\/api\/v1\/cron\/preview/.test(l));
    assert.deepEqual(unexpected, []);
  });
});
