// The dashboard in a real browser (playwright-core driving Debian's chromium) against a
// listening server and a real worker: log in, see a failed job and its error, retry it
// and watch it become done, bulk-retry, simulate a message and see the reply, send a
// suggestion, hostile text shown as text, and screenshots of each main page for the README.
import assert from 'node:assert/strict';
import { scheduleList, scheduleSet } from '../src/queue/index.ts';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { documentSave } from '../src/knowledge/documents.ts';
import { createLogger } from '../src/logger.ts';
import { jobEnqueue, jobGet, Worker, type JobHandler } from '../src/queue/index.ts';
import { startAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

// The README's screenshots are refreshed on request only (UPDATE_SCREENSHOTS=1), so that a
// plain test run leaves the work tree as it found it.
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS ? `${ROOT}docs/screenshots` : mkdtempSync(join(tmpdir(), 'aiq-screenshots-'));
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
    worker = new Worker({ db: t.runtime.db, logger: createLogger('silent'), handlers: [...t.runtime.handlers, flaky], pollIntervalMs: 200, backoff: { baseSeconds: 0, capSeconds: 0 } });
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
    if (!process.env.UPDATE_SCREENSHOTS) rmSync(SCREENSHOTS, { recursive: true, force: true });
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
    await page.getByText(/^Retried: (the job is (pending|running) again|it ran again and succeeded)\.$/).waitFor();
    // No reload: the page refreshes itself while the job is pending or processing.
    await page.locator('[data-status="done"]').waitFor({ timeout: 15_000 });
    assert.equal((await jobGet(t.runtime.db, id))!.status, 'done');
    llmUp = false;
  });

  test('retry from a failed row; the notice tells the real outcome, numbering runs on, and a reload forgets the notice', async () => {
    const id = await jobEnqueue(t.runtime.db, { type: 'autoreply_demo', payload: { n: 'row' }, maxAttempts: 1 });
    await waitFor(async () => (await jobGet(t.runtime.db, id))!.status === 'failed', 'job failed');
    await page.goto(`${base}/admin/jobs?status=failed&type=autoreply_demo`);
    const row = page.locator(`tr[data-job-id="${id}"]`);
    // The LLM is still down: the retried job fails again at once.
    const [redirect] = await Promise.all([page.waitForResponse((r) => r.url().endsWith(`/admin/jobs/${id}/retry`)), row.getByRole('button', { name: 'Retry' }).click()]);
    await page.waitForURL(`${base}/admin/jobs/${id}`);
    await waitFor(async () => (await jobGet(t.runtime.db, id))!.errors.length === 2, 'the retry ran and failed');
    await page.reload();
    assert.equal(await page.locator('.notice').count(), 0, 'a reload shows the page as it is, without the old notice');
    // The retry's own (signed) address again: the notice reads the job as it is now. The
    // same flag in a link from elsewhere, unsigned, shows nothing.
    await page.goto(`${base}/admin/jobs/${id}?retried=1`);
    assert.equal(await page.locator('.notice').count(), 0, 'an unsigned ?retried=1 claims nothing');
    const location = redirect.headers()['location']!;
    assert.match(location, /\?retried=1&sig=/);
    await page.goto(`${base}${location}`);
    assert.equal(await page.locator('.notice').textContent(), 'Retried: it ran again and failed (the newest attempt is at the bottom of the list below).');
    assert.equal(page.url(), `${base}/admin/jobs/${id}`, 'the notice is dropped from the address once shown');
    const numbers = await page.locator('table tbody tr td:first-child').allTextContents();
    assert.deepEqual(numbers, ['1', '2'], 'attempts numbered in order across the retry');
    assert.equal(await page.locator('[data-status="failed"]').count(), 1);
    // Out of the way of the bulk retry below, which counts the failed jobs of this type.
    await t.runtime.db.query('delete from ai_jobs where id = $1', [id]);
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
    // One more fails while the admin reads the prompt: the click retries the three it named.
    const later = await jobEnqueue(t.runtime.db, { type: 'autoreply_demo', payload: { n: 3 }, maxAttempts: 1 });
    await waitFor(async () => (await jobGet(t.runtime.db, later))!.status === 'failed', 'a fourth job failed');
    llmUp = true;
    await page.getByRole('button', { name: 'Retry 3 jobs' }).click();
    await page.getByText('Retrying 3 jobs').waitFor();
    await waitFor(async () => {
      const jobs = await Promise.all(ids.map((id) => jobGet(t.runtime.db, id)));
      return jobs.every((j) => j!.status === 'done');
    }, 'all three done');
    llmUp = false;
    assert.equal((await jobGet(t.runtime.db, later))!.status, 'failed', 'the job that failed after the count was not retried');
    await t.runtime.db.query('delete from ai_jobs where id = $1', [later]);
  });

  test('jobs arriving while the first page refreshes: "older" goes on from the rows shown, skipping none', async () => {
    // Pending jobs of a type no worker here runs: the list stays live (refreshes itself).
    const enqueue = async (n: number) => {
      for (let i = 0; i < n; i++) await jobEnqueue(t.runtime.db, { type: 'paging_probe', payload: { i } });
    };
    await enqueue(60);
    await page.goto(`${base}/admin/jobs?type=paging_probe`);
    const shown = () => page.locator('tr[data-job-id]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job-id')!));
    assert.equal((await shown()).length, 50);
    await enqueue(5);
    await page.evaluate(() => ((document.getElementById('live') as HTMLElement & { old?: boolean }).old = true));
    await page.waitForFunction(() => !(document.getElementById('live') as HTMLElement & { old?: boolean }).old, undefined, { timeout: 10_000 });
    const first = await shown();
    await page.getByRole('link', { name: 'older »' }).click();
    await page.waitForURL(/after=/);
    const second = await shown();
    const newestFirst = (await t.runtime.db.query<{ id: string }>(`select id from ai_jobs where type = 'paging_probe' order by created_at desc, id desc`)).rows.map((r) => r.id);
    assert.deepEqual([...first, ...second], newestFirst, 'the two pages are the list, in order, each job once');
    await t.runtime.db.query(`delete from ai_jobs where type = 'paging_probe'`);
  });

  test('overview shows counts and charts', async () => {
    await page.goto(`${base}/admin`);
    const cell = page.locator('tr', { hasText: 'autoreply_demo' });
    await cell.waitFor();
    assert.ok((await page.locator('svg.chart').count()) >= 2);
    await page.screenshot({ path: `${SCREENSHOTS}/overview.png`, fullPage: true });
  });

  test('simulate an inbound message from the form and see the reply appear in the thread', async () => {
    await page.goto(`${base}/admin/simulate`);
    await page.fill('input[name=from]', '+31687654321');
    await page.fill('input[name=name]', 'Sanne');
    await page.fill('textarea[name=body]', 'Wat zijn de openingstijden?');
    await page.screenshot({ path: `${SCREENSHOTS}/simulate.png` });
    await page.getByRole('button', { name: 'Send as this contact' }).click();
    await page.waitForURL(/\/admin\/conversations\/[0-9a-f-]{36}/);
    await page.locator('.msg.inbound', { hasText: 'Wat zijn de openingstijden?' }).waitFor();
    // The page refreshes itself: the autoreply job runs and its reply shows up, first as
    // pending (written to the outbox before the send), then logged.
    const reply = page.locator('.msg.ai');
    await reply.waitFor({ timeout: 15_000 });
    await reply.locator('.meta', { hasText: 'logged' }).waitFor({ timeout: 15_000 });
    assert.match((await reply.locator('.meta').textContent())!, /logged/);
    await page.screenshot({ path: `${SCREENSHOTS}/conversation.png`, fullPage: true });
  });

  test('a message body <script>alert(1)</script> is shown as text', async () => {
    let alerted = false;
    page.on('dialog', () => (alerted = true));
    const hostile = '<script>alert(1)</script>';
    await page.goto(`${base}/admin/simulate`);
    await page.fill('input[name=from]', '+31611122233');
    await page.fill('input[name=name]', '<img src=x onerror=alert(2)>');
    await page.fill('textarea[name=body]', hostile);
    await page.getByRole('button', { name: 'Send as this contact' }).click();
    await page.waitForURL(/\/admin\/conversations\/[0-9a-f-]{36}/);
    const bubble = page.locator('.msg.inbound .body').first();
    assert.equal(await bubble.textContent(), hostile);
    assert.equal(await page.locator('.msg script').count(), 0);
    await page.goto(`${base}/admin/conversations`);
    // The contact's hostile profile name is listed as text (its last message is the AI's reply by now).
    await page.getByRole('link', { name: /<img src=x onerror=alert\(2\)>/ }).first().waitFor();
    assert.equal(await page.locator('main img').count(), 0);
    await page.screenshot({ path: `${SCREENSHOTS}/conversations.png`, fullPage: true });
    assert.equal(alerted, false, 'no script ran');
  });

  test('pause the AI, ask for a suggestion, edit it and send it', async () => {
    await page.goto(`${base}/admin/simulate`);
    await page.fill('input[name=from]', '+31644455566');
    await page.fill('textarea[name=body]', 'Mag ik morgen later beginnen?');
    await page.getByRole('button', { name: 'Send as this contact' }).click();
    await page.waitForURL(/\/admin\/conversations\/[0-9a-f-]{36}/);
    const conversationId = page.url().split('/').pop()!.split('?')[0]!;
    // Take over before the AI answers? It may have answered already; either way the switch holds from now on.
    await page.locator('#pause-switch').click();
    await page.getByText('AI paused: it will not answer').waitFor();
    await page.getByRole('button', { name: 'Draft a reply with AI' }).click();
    const card = page.locator('.suggestion');
    await card.waitFor({ timeout: 15_000 });
    await card.locator('textarea').fill('Ja, dat is goed. Groet, Petra');
    await page.screenshot({ path: `${SCREENSHOTS}/suggestion.png`, fullPage: true });
    await card.getByRole('button', { name: 'Send' }).click();
    await page.getByText(/Suggestion Sent/).waitFor();
    await page.locator('.msg.admin', { hasText: 'Ja, dat is goed. Groet, Petra' }).waitFor();
    assert.equal(await page.locator('.suggestion').count(), 0, 'no pending suggestion left');
    const sent = await t.runtime.db.query(`select status from suggestions where conversation_id = $1`, [conversationId]);
    assert.deepEqual(sent.rows, [{ status: 'sent' }]);

    // A reply refused (the contact opted out meanwhile) comes back with its text in the box,
    // at the conversation's own address: the live refresh and a reload read the page, not
    // the POST route (review finding).
    await t.runtime.db.query(`update contacts set opted_out_at = now(), opted_out_by = 'admin' where id = (select contact_id from conversations where id = $1)`, [conversationId]);
    try {
      await page.fill('textarea[name=body][required]', 'Bel me even terug?');
      await page.getByRole('button', { name: 'Send reply' }).click();
      await page.locator('.problem', { hasText: 'opted out' }).waitFor();
      assert.equal(await page.inputValue('textarea[name=body][required]'), 'Bel me even terug?');
      // The page's (deferred) script puts the address back once the document is parsed.
      await page.waitForURL((url) => url.pathname === `/admin/conversations/${conversationId}`, { timeout: 5000 });
      await page.reload();
      assert.equal(new URL(page.url()).pathname, `/admin/conversations/${conversationId}`);
      await page.locator('#pause-switch').waitFor();
    } finally {
      await t.runtime.db.query(`update contacts set opted_out_at = null, opted_out_by = null where id = (select contact_id from conversations where id = $1)`, [conversationId]);
    }
  });

  test('an edit of a suggestion survives the live refresh once the admin clicks elsewhere', async () => {
    const headers = { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const simulated = await fetch(`${base}/api/simulate`, { method: 'POST', headers, body: JSON.stringify({ from: '+31677788899', body: 'Waar vind ik mijn loonstrook?' }) });
    const { conversationId } = (await simulated.json()) as { conversationId: string };
    assert.equal((await fetch(`${base}/api/conversations/${conversationId}/pause`, { method: 'POST', headers, body: JSON.stringify({ paused: true }) })).status, 200);
    assert.equal((await fetch(`${base}/api/conversations/${conversationId}/suggest`, { method: 'POST', headers: { authorization: headers.authorization } })).status, 202);
    await page.goto(`${base}/admin/conversations/${conversationId}`);
    const draft = page.locator('.suggestion textarea');
    await draft.waitFor({ timeout: 15_000 });
    await draft.fill('In het portaal, onder Salaris. Groet, Petra');
    // Away from the box (to read the thread, select a line of it): the region refreshes meanwhile.
    await page.locator('h1').click();
    await page.evaluate(() => ((document.getElementById('live') as HTMLElement & { old?: boolean }).old = true));
    await page.waitForFunction(() => !(document.getElementById('live') as HTMLElement & { old?: boolean }).old, undefined, { timeout: 10_000 });
    assert.equal(await draft.inputValue(), 'In het portaal, onder Salaris. Groet, Petra');
  });

  test('forget a person from their conversation: the page asks first, then nothing of them is left', async () => {
    await page.goto(`${base}/admin/simulate`);
    await page.fill('input[name=from]', '+31655566677');
    await page.fill('textarea[name=body]', 'Verwijder mijn gegevens alstublieft');
    await page.getByRole('button', { name: 'Send as this contact' }).click();
    await page.waitForURL(/\/admin\/conversations\/[0-9a-f-]{36}/);
    // A knowledge document that names them: the admin is told which, it is not edited.
    await documentSave(t.runtime.db, { title: 'Contactlijst', body: 'Secretariaat: 06 5556 6677' });
    // Asked on aiq's own page, not by a prompt of the script (which a page without it skipped).
    await page.getByRole('button', { name: 'Forget this person…' }).click();
    const asked = await page.locator('#forget-question').innerText();
    await page.getByRole('button', { name: 'Erase for good' }).click();
    // The notice, not the address: the page drops ?notice= from the address once shown.
    await page.getByText(/Erased: \d+ message\(s\)/).waitFor();
    await page.getByText('1 knowledge document(s) still name this number or email: "Contactlijst".', { exact: false }).waitFor();
    await t.runtime.db.query(`delete from documents where title = 'Contactlijst'`);
    assert.match(new URL(page.url()).pathname, /^\/admin\/conversations$/);
    assert.match(asked, /Erase everything aiq holds about \+31655566677/);
    assert.doesNotMatch(page.url(), /655566677/, 'the number stays out of the address');
    const left = await t.runtime.db.query(`select 1 from messages where body like '%Verwijder mijn gegevens%' union all select 1 from contacts where whatsapp_number = '+31655566677'`);
    assert.equal(left.rowCount, 0);
    const audit = await t.runtime.db.query<{ actor: string; result: string }>(`select actor, result from audit_log where action = 'erase'`);
    assert.deepEqual(audit.rows.map((a) => a.result), ['ok']);
    assert.match(audit.rows[0]!.actor, /^dashboard:[\w-]{8}$/, 'by the session that erased');
    // The audit page lists it, filtered by action.
    await page.goto(`${base}/admin/audit?q=erase`);
    await page.locator('#audit td', { hasText: 'erase' }).first().waitFor();
    assert.equal(await page.locator('#audit tbody tr').count(), 1);
    assert.doesNotMatch(await page.locator('main').innerText(), /655566677|Verwijder/, 'no personal data on the audit page');
  });

  test('AI costs: the page prices the recorded usage per day and per model', async () => {
    await t.runtime.db.query(`insert into ai_usage (purpose, provider, model, operation, prompt_tokens, completion_tokens, total_tokens)
      values ('autoreply', 'openai', 'gpt-4o-mini', 'chat', 2000000, 500000, 2500000)`);
    await page.goto(`${base}/admin/usage?days=7`);
    assert.match((await page.locator('#usage-total').textContent())!, /Last 7 days: USD 0\.60 for 2,500,000 tokens/);
    await page.locator('#usage td', { hasText: 'gpt-4o-mini' }).waitFor();
    assert.equal(await page.locator('header a.active').first().textContent(), 'AI costs');
    await page.screenshot({ path: `${SCREENSHOTS}/usage.png`, fullPage: true });
  });

  test('schedules: the retention schedule and the policy it enforces', async () => {
    await scheduleSet(t.runtime.db, { name: 'retention', cron: '30 3 * * *', type: 'retention_purge' });
    await page.goto(`${base}/admin/schedules`);
    await page.locator('#schedules td', { hasText: 'retention_purge' }).waitFor();
    assert.match(await page.locator('#retention').innerText(), /messages\s+365 days[\s\S]*done jobs\s+14 days[\s\S]*audit log\s+730 days/);
    // Disabled and enabled again from the page, as the README says (found by a new-user
    // probe: the page had no such control).
    const row = page.locator('#schedules tr', { hasText: 'retention_purge' });
    await row.getByRole('button', { name: 'Disable' }).click();
    await page.getByText('Schedule "retention" disabled').waitFor();
    assert.match(await row.innerText(), /\(disabled\)/);
    assert.equal((await scheduleList(t.runtime.db)).find((s) => s.name === 'retention')?.enabled, false);
    await row.getByRole('button', { name: 'Enable' }).click();
    await page.getByText('Schedule "retention" enabled').waitFor();
    assert.equal((await scheduleList(t.runtime.db)).find((s) => s.name === 'retention')?.enabled, true);
  });

  test('knowledge pages: add a document, import a CSV and watch it finish, find the person', async () => {
    await page.goto(`${base}/admin/documents`);
    await page.fill('input[name=title]', 'Opening hours');
    await page.fill('textarea[name=body]', 'The office is open from 9:00 to 17:00, Monday to Friday.');
    await page.getByRole('button', { name: 'Save document' }).click();
    await page.getByText('"Opening hours" inserted').waitFor();
    await page.locator('tr', { hasText: 'Opening hours' }).locator('.b-embedded').waitFor({ timeout: 15_000 });
    await page.screenshot({ path: `${SCREENSHOTS}/documents.png`, fullPage: true });
    // A file: titled as `aiq add-document` titles it (no extension), so saving the same file
    // from the CLI replaces it; its file name is the source.
    await page.setInputFiles('input[type=file]', { name: 'handbook.md', mimeType: 'text/markdown', buffer: Buffer.from('# Leave\n\nEveryone has 25 days of holiday a year.\n') });
    await page.waitForFunction(() => (document.querySelector('textarea[name=body]') as HTMLTextAreaElement).value.includes('25 days'));
    assert.equal(await page.inputValue('input[name=title]'), 'handbook');
    await page.getByRole('button', { name: 'Save document' }).click();
    await page.getByText('"handbook" inserted').waitFor();
    assert.match(await page.locator('tr', { hasText: 'handbook' }).innerText(), /handbook\s+handbook\.md/);

    await page.goto(`${base}/admin/imports`);
    // Saved as Excel's "CSV" in a Western European locale does: Windows-1252, not UTF-8.
    await page.setInputFiles('input[type=file]', {
      name: 'staff.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from('name,phone,email,department,role\nPetra Jansen,+31622233344,petra@example.com,Ressources humaines,Gérante\nNo Phone,,x@example.com,HR,\n', 'latin1'),
    });
    await page.waitForFunction(() => (document.querySelector('textarea[name=content]') as HTMLTextAreaElement).value.includes('Petra'));
    assert.equal(await page.inputValue('input[name=filename]'), 'staff.csv');
    await page.getByRole('button', { name: 'Import' }).click();
    await page.locator('[data-status="done"]').waitFor({ timeout: 15_000 });
    const rowError = page.locator('tbody tr', { hasText: 'is not an international number' });
    assert.equal(await rowError.locator('td.num').textContent(), '3', 'the rejected row is named by its line');
    await page.screenshot({ path: `${SCREENSHOTS}/import.png`, fullPage: true });

    // The same list marked complete: everyone else is a leaver and goes; Petra stays.
    const others = (await t.runtime.db.query<{ n: number }>(`select count(*)::int as n from people where phone <> '+31622233344'`)).rows[0]!.n;
    await page.goto(`${base}/admin/imports`);
    await page.fill('input[name=filename]', 'all-staff.csv');
    await page.fill('textarea[name=content]', 'name,phone\nPetra Jansen,+31622233344\n');
    await page.getByRole('checkbox', { name: /complete list/ }).check();
    await page.getByRole('button', { name: 'Import' }).click();
    await page.locator('[data-status="done"]').waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('#removed').textContent(), String(others));
    assert.equal((await t.runtime.db.query('select 1 from people')).rowCount, 1);

    await page.goto(`${base}/admin/people?q=petra`);
    await page.getByRole('link', { name: 'Petra Jansen' }).click();
    await page.getByText('petra@example.com').waitFor();
    await page.getByText('Gérante').waitFor();
    await page.goto(`${base}/admin/people`);
    await page.screenshot({ path: `${SCREENSHOTS}/people.png`, fullPage: true });
  });
});
