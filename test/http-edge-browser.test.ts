// Cross-site requests in a real browser: an open-mode aiq (no ADMIN_TOKEN, loopback) and an
// attacker's page on another port of the same machine, both opened in Chromium. The page
// fires the requests a page can send without the server's consent (a no-cors fetch, an
// auto-submitted form); nothing changes. The same action from aiq's own page still works.
// And a token-mode aiq reached by a page whose name rebinds to it: same-origin to the
// browser, its wrong guesses must not lock the admin out.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { jobEnqueue, jobGet } from '../src/queue/index.ts';
import { startAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';

describe('another site in the admin’s browser', () => {
  let t: AdminApp;
  let browser: Browser;
  let attacker: Server;
  let base: string;
  let evil: string;
  let jobId: string;

  before(async () => {
    t = await startAdminApp({ ADMIN_TOKEN: '' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    jobId = await jobEnqueue(t.runtime.db, { type: 'cross_site_probe', payload: {} });
    await t.runtime.db.query(`update ai_jobs set status = 'failed', finished_at = now(), last_error = 'probe' where id = $1`, [jobId]);
    attacker = createServer((req, res) => {
      res.setHeader('content-type', 'text/html');
      if (req.url === '/frames') {
        res.end(`<!doctype html><body>
<iframe src="${base}/admin/jobs/${jobId}"></iframe><iframe src="${base}/api/backup"></iframe><iframe src="${base}/api/jobs"></iframe>
<a id="link" href="${base}/admin/jobs/${jobId}">the job</a></body>`);
        return;
      }
      res.end(`<!doctype html><body>
<form id="f" method="post" action="${base}/admin/jobs/${jobId}/retry"><input name="_csrf" value="guess"></form>
<script>
  Promise.all([
    fetch('${base}/api/jobs/retry-failed', { method: 'POST', mode: 'no-cors' }),
    fetch('${base}/api/jobs/${jobId}/retry', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{}' }),
  ]).catch(() => {}).finally(() => { document.title = 'fired'; document.getElementById('f').submit(); });
</script></body>`);
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    evil = `http://localhost:${(attacker.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  after(async () => {
    await browser?.close();
    await new Promise((resolve) => attacker?.close(resolve));
    await t?.close();
  });

  test('the attacker page changes nothing; the dashboard’s own retry works', async () => {
    const page = await browser.newPage();
    // The admin has the dashboard open (an open-mode session cookie exists) …
    await page.goto(`${base}/admin/jobs/${jobId}`);
    // … and visits the other page, which fires its requests and then posts its form.
    const responses: number[] = [];
    page.on('response', (response) => {
      if (response.url().startsWith(base)) responses.push(response.status());
    });
    await page.goto(evil);
    await page.waitForURL(`${base}/admin/jobs/${jobId}/retry`);
    assert.match(await page.content(), /another site/);
    assert.ok(responses.length >= 1 && responses.every((status) => status === 403), `every request reached us as 403: ${responses}`);
    assert.equal((await jobGet(t.runtime.db, jobId))!.status, 'failed', 'nothing changed');

    await page.goto(`${base}/admin/jobs/${jobId}`);
    await page.getByRole('button', { name: 'Retry' }).click();
    await page.locator('.notice').waitFor();
    assert.equal((await jobGet(t.runtime.db, jobId))!.status, 'pending', 'our own page retried it');
    await page.close();
  });

  test('the attacker page cannot frame the dashboard or the API; its plain link opens the dashboard', async () => {
    const page = await browser.newPage();
    await page.goto(`${base}/admin`);
    const responses = new Map<string, number>();
    page.on('response', (response) => {
      if (response.url().startsWith(base)) responses.set(response.url().slice(base.length), response.status());
    });
    await page.goto(`${evil}/frames`);
    assert.deepEqual(Object.fromEntries(responses), { [`/admin/jobs/${jobId}`]: 403, '/api/backup': 403, '/api/jobs': 403 });
    await page.click('#link');
    await page.waitForURL(`${base}/admin/jobs/${jobId}`);
    assert.equal(responses.get(`/admin/jobs/${jobId}`), 200, 'a link clicked on another site opens the page');
    await page.close();
  });
});

describe('a page that DNS-rebinds its own name to aiq, in the admin’s browser (token mode)', () => {
  test('its wrong tokens and logins are refused before they count: the admin still logs in', async () => {
    const limit = 3;
    const t = await startAdminApp({ AUTH_FAILURE_LIMIT: String(limit), AUTH_FAILURE_WINDOW_SECONDS: '600' });
    let browser: Browser | undefined;
    try {
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      const port = (t.app.server.address() as AddressInfo).port;
      // evil.test resolves to aiq's address, as the attacker's DNS answers once its page is
      // loaded. Chromium's Private Network Access would stop a public page reaching this
      // loopback port; it is off here, as it is in Firefox and Safari, and as it does not
      // apply when aiq is on a public address (where token mode is meant to be).
      browser = await chromium.launch({
        executablePath: '/usr/bin/chromium',
        args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--host-resolver-rules=MAP evil.test 127.0.0.1', '--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,LocalNetworkAccessChecks'],
      });
      const page = await browser.newPage();
      // The attacker's page as its own server gave it, before the rebind; everything it asks
      // for afterwards goes to aiq, same-origin to the browser.
      await page.route(`http://evil.test:${port}/`, (route) =>
        route.fulfill({
          contentType: 'text/html',
          body: `<!doctype html><script>
(async () => {
  const statuses = [];
  for (let i = 0; i < ${2 * limit}; i++) {
    statuses.push((await fetch('/api/stats', { headers: { authorization: 'Bearer guess-' + i } })).status);
    statuses.push((await fetch('/admin/login', { method: 'POST', body: new URLSearchParams({ token: 'guess-' + i, next: '/admin' }), redirect: 'manual' })).status);
  }
  document.title = 'done ' + statuses.join(',');
})().catch((err) => { document.title = 'done error ' + err; });
</script>`,
        }),
      );
      await page.goto(`http://evil.test:${port}/`);
      await page.waitForFunction(() => document.title.startsWith('done'));
      const statuses = (await page.title()).slice('done '.length).split(',');
      assert.deepEqual(new Set(statuses), new Set(['403']), `every guess refused, none counted: ${statuses.join(',')}`);

      // The admin, from the same browser and address, logs in as usual.
      await page.goto(`http://127.0.0.1:${port}/admin/login`);
      await page.fill('input[name=token]', TEST_ADMIN_TOKEN);
      await page.click('button[type=submit]');
      await page.waitForURL(`http://127.0.0.1:${port}/admin`);
      await page.close();
    } finally {
      await browser?.close();
      await t.close();
    }
  });
});
