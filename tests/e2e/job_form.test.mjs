// The job form in a real browser against a real `gnomon serve`: create a job from the
// playground's schedule (a local and two API validation errors shown next to their inputs), edit
// it (If-Match with the version of the page), a concurrent change shown as a conflict and not
// overwritten, delete after a confirmation, a config-file job offered no edit or delete, a job
// created with the keyboard alone, and the form at phone width.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  ADMIN_TOKEN, launchBrowser, resultsDir, startServer, waitFor, watchConsole,
} from './harness.mjs';

const JOB = 'e2e-form';
const FILE_JOB = 'e2e-from-file';
const STEP_TIMEOUT = 15000;
const HEADERS = { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' };

mkdirSync(resultsDir, { recursive: true });

async function shot(page, name) {
  await page.evaluate(() => {
    window.scrollTo(0, 0);
    document.getElementById('toasts').replaceChildren();
  });
  await page.screenshot({ path: path.join(resultsDir, `${name}.png`), fullPage: true });
}

async function waitForText(page, selector, pattern) {
  await waitFor(`${selector} to match ${pattern}`, async () => {
    const texts = await page.locator(selector).allTextContents();
    return texts.some((t) => pattern.test(t));
  }, STEP_TIMEOUT);
}

const activeId = (page) => page.evaluate(() => document.activeElement && document.activeElement.id);

describe('job form', () => {
  let server;
  let browser;
  let page;
  let consoleLog;

  async function getJob(id) {
    const res = await fetch(`${server.url}/api/v1/jobs/${id}`, { headers: HEADERS });
    return { status: res.status, etag: res.headers.get('etag'), body: res.status === 200 ? await res.json() : null };
  }

  // The input with this label, exactly (the form has "Retries" and "Retry backoff", ...).
  const input = (label) => page.getByLabel(label, { exact: true });

  // The error line of an input: shown next to it, announced with it, and the focus on it.
  async function assertFieldError(id, pattern) {
    await waitForText(page, `#${id}-error`, pattern);
    const field = page.locator(`#${id}`);
    assert.equal(await field.getAttribute('aria-invalid'), 'true');
    assert.ok((await field.getAttribute('aria-describedby')).split(' ').includes(`${id}-error`));
    await waitFor(`the focus on #${id}`, async () => (await activeId(page)) === id, STEP_TIMEOUT);
  }

  before(async () => {
    server = await startServer({
      tokens: true,
      config: ['[[job]]', `id = "${FILE_JOB}"`, 'schedule = "@yearly"', 'command = "true"', ''],
    });
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    consoleLog = watchConsole(page);
    await page.goto(`${server.url}/#token=${ADMIN_TOKEN}`); // the sign-in link
    await page.waitForURL(/#\/jobs$/);
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) await server.stop();
  });

  test('creates a job from the playground, errors next to their inputs', async () => {
    await page.goto(`${server.url}/#/playground`);
    await page.getByLabel('Cron expression').fill('0 3 * * *');
    await page.getByLabel('Time zone').fill('Europe/Paris');
    await page.getByLabel('Job id (seeds H)').fill(JOB);
    await waitForText(page, '#pg-reading', /03:00/);
    await page.getByRole('link', { name: 'Create a job with this schedule' }).click();
    await page.waitForURL(/#\/new-job\?/);
    assert.equal(await input('Job id').inputValue(), JOB);
    assert.equal(await input('Schedule').inputValue(), '0 3 * * *');
    assert.equal(await input('Time zone').inputValue(), 'Europe/Paris');
    await waitForText(page, '#jf-schedule-reading', /^Reads as: .*03:00/);
    // Prefilled up to the command: the focus waits there.
    assert.equal(await activeId(page), 'jf-command');

    await input('Command').fill('echo made-by-the-form');
    // The form's own encoding: params must be a JSON object. Nothing is sent.
    let posts = 0;
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/api/v1/jobs')) posts += 1;
    });
    await input('Default parameters (JSON object)').fill('[1, 2]');
    await page.getByRole('button', { name: 'Create job' }).click();
    await assertFieldError('jf-params', /params: must be a JSON object/);
    assert.equal(posts, 0);
    await input('Default parameters (JSON object)').fill('{"region": "eu"}');
    assert.equal(await page.locator('#jf-params-error').textContent(), '');

    // The API's rules: its 400 names the key, and the message goes next to that input.
    await input('Timeout').fill('soon');
    await page.getByRole('button', { name: 'Create job' }).click();
    await assertFieldError('jf-timeout', /^timeout: invalid duration "soon"/);
    assert.equal(await page.locator('#jf-params').getAttribute('aria-invalid'), null, 'the old error is gone');
    await input('Timeout').fill('2m');
    // An error in the collapsed advanced section opens it.
    assert.equal(await page.locator('details.advanced').evaluate((d) => d.open), false);
    await page.locator('details.advanced summary').click();
    await input('Shards').fill('0');
    await page.locator('details.advanced summary').click();
    await page.getByRole('button', { name: 'Create job' }).click();
    await assertFieldError('jf-shards', /shards: 0 is out of range 1-1024/);
    assert.equal(await page.locator('details.advanced').evaluate((d) => d.open), true);
    await input('Shards').fill('2');
    await input('Overlap').selectOption('allow');
    await input('Environment').fill('MODE=strict\nTEAM=ops');
    await page.getByRole('button', { name: 'Create job' }).click();
    await page.waitForURL(new RegExp(`#/jobs/${JOB}$`));
    await waitForText(page, '.definition', /echo made-by-the-form/);
    assert.equal(posts, 3);

    const { body } = await getJob(JOB);
    assert.equal(body.read_only, false);
    assert.equal(body.spec.schedule, '0 3 * * *');
    assert.equal(body.spec.timezone, 'Europe/Paris');
    assert.equal(body.spec.command, 'echo made-by-the-form');
    assert.equal(body.spec.timeout, '2m');
    assert.equal(body.spec.shards, 2);
    assert.equal(body.spec.overlap, 'allow');
    assert.equal(body.spec.retries, 0, 'an empty input takes the default');
    assert.deepEqual(body.spec.params, { region: 'eu' });
    assert.deepEqual(body.spec.env, { MODE: 'strict', TEAM: 'ops' });
  });

  test('edits the job, sending the version it shows as If-Match', async () => {
    const before = await getJob(JOB);
    await page.getByRole('link', { name: `Edit ${JOB}` }).click();
    await page.waitForURL(new RegExp(`#/jobs/${JOB}/edit$`));
    await waitForText(page, '#jf-version', new RegExp(`version ${before.body.version}\\b`));
    // Every key of the definition is in the form.
    assert.equal(await input('Command').inputValue(), 'echo made-by-the-form');
    assert.deepEqual(JSON.parse(await input('Default parameters (JSON object)').inputValue()), { region: 'eu' });
    assert.equal(await input('Environment').inputValue(), 'MODE=strict\nTEAM=ops');
    assert.equal(await input('Overlap').inputValue(), 'allow');
    assert.equal(await input('Shards').inputValue(), '2');
    assert.equal(await input('History records kept').inputValue(), '100');
    assert.equal(await page.locator('#jf-id').count(), 0, 'the id cannot change');

    await input('Description').fill('edited in the browser');
    await input('Retries').fill('2');
    await page.locator('details.advanced summary').click();
    await input('History records kept').fill('50');
    const put = page.waitForRequest((r) => r.method() === 'PUT' && r.url().endsWith(`/api/v1/jobs/${JOB}`));
    await page.getByRole('button', { name: 'Save changes' }).click();
    assert.equal((await put).headers()['if-match'], before.etag);
    await page.waitForURL(new RegExp(`#/jobs/${JOB}$`));
    await waitForText(page, '.definition', /edited in the browser/);
    const { body } = await getJob(JOB);
    assert.equal(body.version, before.body.version + 1);
    assert.equal(body.spec.description, 'edited in the browser');
    assert.equal(body.spec.retries, 2);
    assert.equal(body.spec.history_keep, 50);
    assert.equal(body.spec.command, 'echo made-by-the-form', 'the untouched keys stay');
    assert.equal(body.spec.shards, 2);
  });

  test('a change made meanwhile is a conflict, not overwritten', async () => {
    await page.goto(`${server.url}/#/jobs/${JOB}/edit`);
    await input('Description').waitFor();
    await input('Description').fill('mine');
    // Someone else replaces the job after the form was opened.
    const current = await getJob(JOB);
    const res = await fetch(`${server.url}/api/v1/jobs/${JOB}`, {
      method: 'PUT', headers: { ...HEADERS, 'If-Match': current.etag },
      body: JSON.stringify({ ...current.body.spec, description: 'changed elsewhere' }),
    });
    assert.equal(res.status, 200);
    await page.getByRole('button', { name: 'Save changes' }).click();
    await waitForText(page, '#jf-conflict', new RegExp(`${JOB} was changed by someone else since you opened this form`));
    await waitForText(page, '#jf-conflict', /Your changes were not saved/);
    assert.equal(await activeId(page), 'jf-conflict');
    assert.equal((await getJob(JOB)).body.spec.description, 'changed elsewhere');
    await shot(page, 'job-form-conflict-1280');

    await page.getByRole('button', { name: 'Load the current version' }).click();
    await waitFor('the current version in the form',
      async () => (await input('Description').inputValue()) === 'changed elsewhere', STEP_TIMEOUT);
    assert.equal(await page.locator('#jf-conflict').count(), 0);
    await input('Description').fill('mine, after reading theirs');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForURL(new RegExp(`#/jobs/${JOB}$`));
    assert.equal((await getJob(JOB)).body.spec.description, 'mine, after reading theirs');
  });

  test('a job from a config file offers no edit or delete, and says why', async () => {
    await page.goto(`${server.url}/#/jobs/${FILE_JOB}`);
    await waitForText(page, '.notice-info', /Read-only here\. e2e-from-file is defined in .*gnomon\.toml:\d+/);
    await page.getByRole('button', { name: `Pause ${FILE_JOB}` }).waitFor();
    assert.equal(await page.getByRole('link', { name: `Edit ${FILE_JOB}` }).count(), 0);
    assert.equal(await page.getByRole('button', { name: /^Delete/ }).count(), 0);
    await page.goto(`${server.url}/#/jobs/${FILE_JOB}/edit`);
    await waitForText(page, '.notice-info', /change the file and reload/);
    assert.equal(await page.locator('form.job-form').count(), 0);
    // What the API answers, and why the page offers nothing.
    const res = await fetch(`${server.url}/api/v1/jobs/${FILE_JOB}`, { method: 'DELETE', headers: HEADERS });
    assert.equal(res.status, 409);
    assert.equal((await res.json()).error.code, 'read_only');
  });

  test('deletes the job only after a confirmation naming it', async () => {
    await page.goto(`${server.url}/#/jobs/${JOB}`);
    const ask = page.getByRole('button', { name: 'Delete…' });
    await ask.click();
    await waitForText(page, '#del-confirm', new RegExp(`Delete job ${JOB}\\?`));
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Keep it');
    await page.keyboard.press('Escape');
    await page.locator('#del-confirm').waitFor({ state: 'hidden' });
    assert.equal((await getJob(JOB)).status, 200, 'nothing deleted without the second step');
    await ask.click();
    await page.getByRole('button', { name: `Delete ${JOB}`, exact: true }).click();
    await page.waitForURL(/#\/jobs$/);
    assert.equal((await getJob(JOB)).status, 404);
  });

  test('creates a job with the keyboard alone', async () => {
    await page.goto(`${server.url}/#/jobs`);
    await page.getByRole('link', { name: 'New job' }).focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(/#\/new-job$/);
    await waitFor('the focus on the job id', async () => (await activeId(page)) === 'jf-id', STEP_TIMEOUT);
    await page.keyboard.type('e2e-keys');
    const tabTo = async (id) => {
      for (let i = 0; i < 40 && (await activeId(page)) !== id; i += 1) await page.keyboard.press('Tab');
      assert.equal(await activeId(page), id, `Tab reaches #${id}`);
    };
    await tabTo('jf-schedule');
    await page.keyboard.type('@every 1h');
    await tabTo('jf-executor-command');
    await page.keyboard.press('ArrowRight'); // the next executor: argv
    assert.equal(await activeId(page), 'jf-executor-argv');
    assert.equal(await page.locator('#jf-command').isVisible(), false);
    await tabTo('jf-argv');
    await page.keyboard.type('echo');
    await page.keyboard.press('Enter');
    await page.keyboard.type('typed');
    await tabTo('jf-timeout');
    await page.keyboard.type('30s');
    await page.keyboard.press('Enter'); // submits the form
    await page.waitForURL(/#\/jobs\/e2e-keys$/);
    const { body } = await getJob('e2e-keys');
    assert.deepEqual(body.spec.argv, ['echo', 'typed']);
    assert.equal(body.spec.command, undefined);
    assert.equal(body.spec.schedule, '@every 1h');
    assert.equal(body.spec.timeout, '30s');
  });

  test('reads well on a phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const noSideways = async (name) => {
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(overflow <= 0, `${name}: the page scrolls sideways by ${overflow}px on a phone`);
    };
    await page.goto(`${server.url}/#/new-job`);
    await page.locator('form.job-form').waitFor();
    await page.locator('details.advanced summary').click();
    await noSideways('new job');
    // Inputs fill the width of the phone, one column.
    const widths = await page.locator('#jf-timeout, #jf-retries').evaluateAll(
      (nodes) => nodes.map((n) => n.getBoundingClientRect().width));
    for (const w of widths) assert.ok(w > 300, `an input is ${w}px wide on a 390px screen`);
    await shot(page, 'job-form-phone');
    await page.goto(`${server.url}/#/jobs/e2e-keys/edit`);
    await page.locator('form.job-form').waitFor();
    await page.getByRole('button', { name: 'Delete…' }).click();
    await noSideways('edit job');
    await shot(page, 'job-edit-phone');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  test('had no console errors', () => {
    assert.deepEqual(consoleLog.errors, []);
    // The failed requests made on purpose: the two refused creates, the refused PUT (412), and
    // previews of a schedule while it was typed.
    const unexpected = consoleLog.network.filter((l) => !/status of 400 .*\/api\/v1\/cron\/preview/.test(l));
    const creates = unexpected.filter((l) => /status of 400 .*\/api\/v1\/jobs\)$/.test(l));
    const conflicts = unexpected.filter((l) => /status of 412 .*\/api\/v1\/jobs\/e2e-form/.test(l));
    assert.equal(creates.length, 2, unexpected.join('\n'));
    assert.equal(conflicts.length, 1, unexpected.join('\n'));
    assert.equal(unexpected.length, 3, unexpected.join('\n'));
  });
});
