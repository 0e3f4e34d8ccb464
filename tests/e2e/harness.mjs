// Test harness for the dashboard's browser tests: a real `gnomon serve` on a free loopback port
// with a temporary SQLite backend and an admin token, and the system Chromium driven by
// playwright-core (never a downloaded browser).
import { spawn } from 'node:child_process';
import {
  copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
export const resultsDir = path.join(here, 'test-results');
export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
export const ADMIN_TOKEN = 'e2e-admin-token-0123456789abcdef';

export function gnomonBin() {
  const bin = process.env.GNOMON_BIN || path.join(repoRoot, 'build/dev/apps/gnomon/gnomon');
  if (!existsSync(bin)) {
    throw new Error(`gnomon binary not found at ${bin}: build it or set GNOMON_BIN`);
  }
  return bin;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export async function waitFor(what, fn, timeoutMs = 20000, intervalMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

// Starts `gnomon serve`. tokens=false: a server with `[api] auth = "none"` (no authentication);
// tokens='generated': no [[token]], so the server generates its admin token. `config` adds lines.
export async function startServer({ tokens = true, config: extra = [] } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gnomon-e2e-'));
  const config = path.join(dir, 'gnomon.toml');
  writeFileSync(config, [
    '[scheduler]', 'heartbeat_interval = "500ms"', '',
    // The tests run as root; jobs made in the dashboard may run as root here.
    '[[policy]]', 'allow_root = true', '',
    ...(tokens === 'generated' ? []
      : tokens ? ['[[token]]', 'name = "e2e-admin"', `token = "${ADMIN_TOKEN}"`, 'role = "admin"', '']
        : ['[api]', 'auth = "none"', '']),
    ...extra,
  ].join('\n'));
  const port = await freePort();
  const logPath = path.join(dir, 'serve.log');
  const log = openSync(logPath, 'w');
  const proc = spawn(gnomonBin(), ['serve', '--config', config, '--backend', `sqlite://${dir}/gnomon.db`,
    '--node-id', 'e2e-node', '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', log, log] });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const url = `http://127.0.0.1:${port}`;
  await waitFor('gnomon serve to answer /healthz', async () => {
    if (proc.exitCode !== null) {
      throw new Error(`gnomon serve exited (${proc.exitCode}): ${readFileSync(logPath, 'utf8')}`);
    }
    const res = await fetch(`${url}/healthz`);
    return res.ok;
  }, 30000);
  return {
    url,
    dir,
    log: () => readFileSync(logPath, 'utf8'),
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
        await exited;
        clearTimeout(timer);
      }
      // The server's log outlives its directory, for the reading of a failed run.
      mkdirSync(resultsDir, { recursive: true });
      copyFileSync(logPath, path.join(resultsDir, `serve-${port}.log`));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// `extraArgs`: more Chromium flags (e.g. --host-resolver-rules).
export async function launchBrowser({ extraArgs = [] } = {}) {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (scripts/install-deps.sh)`);
  }
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'gnomon-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ...extraArgs],
    viewport: { width: 1280, height: 900 },
    timezoneId: 'UTC',
    locale: 'en-GB',
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

// Collects what would show in DevTools as an error: uncaught exceptions and console.error.
// The browser's own "Failed to load resource" lines for answers the page expects (a 400 from
// the cron preview while an expression is half typed) are kept apart.
export function watchConsole(page) {
  const errors = [];
  const network = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    if (text.startsWith('Failed to load resource')) network.push(`${text} (${msg.location().url})`);
    else errors.push(`console.error: ${text}`);
  });
  return { errors, network };
}
