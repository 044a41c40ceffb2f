// The dashboard in a real browser (playwright-core driving Debian's chromium) against a
// listening server and a real worker: log in, see a failed job and its error, retry it
// and watch it become done, bulk-retry, and screenshots of each main page for the README.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createLogger } from '../src/logger.ts';
import { jobEnqueue, jobGet, Worker, type JobHandler } from '../src/queue/index.ts';
import { startAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

const SCREENSHOTS = `${ROOT}docs/screenshots`;
const anything = { safeParse: (input: unknown) => ({ success: true as const, data: input }) };

describe('dashboard in a browser', () => {
  let t: AdminApp;
  let worker: Worker;
  let browser: Browser;
  let page: Page;
  let base: string;
  // The "LLM" is down until a test brings it back.
  let llmUp = false;
  const flaky: JobHandler = {
    type: 'autoreply_demo',
    schema: anything,
    run: async () => {
      await new Promise((resolve) => setTimeout(resolve, 30));
      if (!llmUp) throw new Error('LLM unreachable: connect ECONNREFUSED 127.0.0.1:11434');
      return { tokens: 42 };
    },
  };

  before(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    t = await startAdminApp();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = t.app.server.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    worker = new Worker({ db: t.runtime.db, logger: createLogger('silent'), handlers: [flaky], pollIntervalMs: 200, backoff: { baseSeconds: 0, capSeconds: 0 } });
    t.runtime.metrics.attachWorker(worker);
    await worker.start();
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('dialog', (dialog) => void dialog.accept());
  });

  after(async () => {
    await browser?.close();
    await worker?.stop();
    await t?.close();
  });

  test('log in', async () => {
    await page.goto(`${base}/admin`);
    assert.match(page.url(), /\/admin\/login/);
    await page.screenshot({ path: `${SCREENSHOTS}/login.png` });
    await page.fill('input[name=token]', 'wrong-token-here');
    await page.click('button[type=submit]');
    await page.getByText('That is not the admin token.').waitFor();
    await page.fill('input[name=token]', TEST_ADMIN_TOKEN);
    await page.click('button[type=submit]');
    await page.waitForURL(`${base}/admin`);
    await page.getByRole('heading', { name: 'Queue overview' }).waitFor();
  });

  test('see a failed job with its error, retry it and watch it become done', async () => {
    const id = await jobEnqueue(t.runtime.db, { type: 'autoreply_demo', payload: { messageId: 'demo-1', body: 'Hoi, hoe laat open?' }, maxAttempts: 2 });
    await waitFor(async () => (await jobGet(t.runtime.db, id))!.status === 'failed', 'job failed');

    await page.goto(`${base}/admin/jobs?status=failed`);
    const row = page.locator('tr', { hasText: id.slice(0, 8) });
    await row.getByText('LLM unreachable').waitFor();
    await page.screenshot({ path: `${SCREENSHOTS}/jobs.png`, fullPage: true });
    await row.getByRole('link', { name: id.slice(0, 8) }).click();
    await page.waitForURL(`${base}/admin/jobs/${id}`);
    assert.equal(await page.locator('pre.error').textContent(), 'LLM unreachable: connect ECONNREFUSED 127.0.0.1:11434');
    assert.equal(await page.locator('table tbody tr').count(), 2, 'both failed attempts are listed');
    await page.screenshot({ path: `${SCREENSHOTS}/job-detail.png`, fullPage: true });

    llmUp = true;
    await page.getByRole('button', { name: 'Retry' }).click();
    await page.getByText('Retrying: the job is pending again.').waitFor();
    // No reload: the page refreshes itself while the job is pending or processing.
    await page.locator('[data-status="done"]').waitFor({ timeout: 15_000 });
    assert.equal((await jobGet(t.runtime.db, id))!.status, 'done');
    llmUp = false;
  });

  test('bulk retry: the confirmation says how many', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await jobEnqueue(t.runtime.db, { type: 'autoreply_demo', payload: { n: i }, maxAttempts: 1 }));
    await waitFor(async () => {
      const jobs = await Promise.all(ids.map((id) => jobGet(t.runtime.db, id)));
      return jobs.every((j) => j!.status === 'failed');
    }, 'three jobs failed');
    await page.goto(`${base}/admin/jobs?status=failed&type=autoreply_demo`);
    await page.getByRole('link', { name: /Retry all failed jobs matching/ }).click();
    await page.locator('#confirm-count').waitFor();
    assert.match((await page.locator('#confirm-count').textContent())!, /Retry all 3 failed jobs matching type "autoreply_demo"/);
    await page.screenshot({ path: `${SCREENSHOTS}/bulk-retry.png` });
    llmUp = true;
    await page.getByRole('button', { name: 'Retry 3 jobs' }).click();
    await page.getByText('Retrying 3 jobs').waitFor();
    await waitFor(async () => {
      const jobs = await Promise.all(ids.map((id) => jobGet(t.runtime.db, id)));
      return jobs.every((j) => j!.status === 'done');
    }, 'all three done');
    llmUp = false;
  });

  test('overview shows counts and charts', async () => {
    await page.goto(`${base}/admin`);
    const cell = page.locator('tr', { hasText: 'autoreply_demo' });
    await cell.waitFor();
    assert.ok((await page.locator('svg.chart').count()) >= 2);
    await page.screenshot({ path: `${SCREENSHOTS}/overview.png`, fullPage: true });
  });
});
