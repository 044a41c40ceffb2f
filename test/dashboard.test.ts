// The dashboard over HTTP (inject), and /metrics: login and the signed session cookie,
// CSRF and Origin checks on posts, escaping of user text, open mode without a token, and
// the metrics fed by a real worker.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../src/logger.ts';
import { formatTick } from '../src/http/dashboard/charts.ts';
import { PromMetrics } from '../src/http/metrics.ts';
import { jobEnqueue, jobGet, Worker } from '../src/queue/index.ts';
import { startAdminApp, startEmbeddedAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';
import { freshServerDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';

async function login(t: AdminApp, headers: Record<string, string> = {}) {
  const response = await t.app.inject({ method: 'POST', url: '/admin/login', headers, payload: { token: TEST_ADMIN_TOKEN, next: '/admin/jobs' } });
  assert.equal(response.statusCode, 303);
  const setCookie = String(response.headers['set-cookie']);
  return { response, setCookie, cookie: setCookie.split(';')[0]! };
}

function csrfOf(body: string): string {
  const match = /name="csrf-token" content="([^"]+)"/.exec(body);
  assert.ok(match, 'page carries a CSRF token');
  return match[1]!;
}

describe('dashboard with ADMIN_TOKEN', () => {
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp();
  });
  after(() => t.close());

  test('pages send the browser to the login form; a wrong token is refused', async () => {
    const page = await t.app.inject({ url: '/admin/jobs?status=failed' });
    assert.equal(page.statusCode, 303);
    assert.equal(page.headers.location, '/admin/login?next=%2Fadmin%2Fjobs%3Fstatus%3Dfailed');
    const wrong = await t.app.inject({ method: 'POST', url: '/admin/login', payload: { token: 'nope' } });
    assert.equal(wrong.statusCode, 401);
    assert.match(wrong.body, /not the admin token/);
    assert.equal(wrong.headers['set-cookie'], undefined);
    const post = await t.app.inject({ method: 'POST', url: '/admin/jobs/retry-failed', payload: {} });
    assert.equal(post.statusCode, 401);
  });

  test('login sets an HttpOnly, SameSite, signed cookie (Secure over https) and redirects to a local page only', async () => {
    const { response, setCookie, cookie } = await login(t);
    assert.equal(response.headers.location, '/admin/jobs');
    assert.match(setCookie, /HttpOnly/);
    assert.match(setCookie, /SameSite=Lax/);
    assert.match(setCookie, /Path=\/admin/);
    assert.doesNotMatch(setCookie, /Secure/);
    // X-Forwarded-Proto is a client's word unless TRUST_PROXY names the proxy (test/http-edge.test.ts).
    const forwarded = await login(t, { 'x-forwarded-proto': 'https' });
    assert.doesNotMatch(forwarded.setCookie, /Secure/);
    assert.equal((await t.app.inject({ url: '/admin', headers: { cookie } })).statusCode, 200);

    const forged = cookie.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    assert.equal((await t.app.inject({ url: '/admin', headers: { cookie: forged } })).statusCode, 303);
    const expired = cookie.replace(/\.(\d+)\./, '.1000.');
    assert.equal((await t.app.inject({ url: '/admin', headers: { cookie: expired } })).statusCode, 303);

    const offsite = await t.app.inject({ method: 'POST', url: '/admin/login', payload: { token: TEST_ADMIN_TOKEN, next: '//evil.example/admin' } });
    assert.equal(offsite.headers.location, '/admin');
    // A line break or a character a header cannot hold was a 500 and an error with a stack
    // in the log (found by a security probe): the dashboard's home instead.
    for (const next of ['/admin\r\nSet-Cookie: x=1', '/admin\u2028x', '/admin/jobs?q=\u00e9']) {
      const odd = await t.app.inject({ method: 'POST', url: '/admin/login', payload: { token: TEST_ADMIN_TOKEN, next } });
      assert.equal(odd.statusCode, 303, JSON.stringify(next));
      assert.equal(odd.headers.location, '/admin');
      assert.equal((await t.app.inject({ url: `/admin/login?next=${encodeURIComponent(next)}` })).statusCode, 200);
    }
    // A link naming its next page twice (a query string is a list) was a 500: the form, for the dashboard's home.
    const twice = await t.app.inject({ url: '/admin/login?next=/admin/jobs&next=//evil.example' });
    assert.equal(twice.statusCode, 200, twice.body);
    assert.match(twice.body, /name="next" value="\/admin"/);
  });

  test('a malformed or extra session cookie counts as absent: no 500, and the real one still works', async () => {
    for (const cookie of ['aiq_session=%', 'aiq_session=%E0%A4%A', 'aiq_session=']) {
      const page = await t.app.inject({ url: '/admin/jobs', headers: { cookie } });
      assert.equal(page.statusCode, 303, `${cookie}: ${page.body.slice(0, 200)}`);
      assert.equal(page.headers.location, '/admin/login?next=%2Fadmin%2Fjobs');
    }
    // Another port of this host shares our cookies; its own aiq_session with a narrower Path comes first.
    const { cookie } = await login(t);
    for (const planted of ['aiq_session=%', 'aiq_session=v1.forged.9999999999.mac']) {
      const page = await t.app.inject({ url: '/admin/jobs', headers: { cookie: `${planted}; other=1; ${cookie}` } });
      assert.equal(page.statusCode, 200, planted);
      const csrf = csrfOf(page.body);
      const post = await t.app.inject({ method: 'POST', url: '/admin/jobs/retry-failed', headers: { cookie: `${planted}; ${cookie}`, origin: 'http://localhost' }, payload: { _csrf: csrf } });
      assert.equal(post.statusCode, 303, planted);
    }
  });

  test('posts need the CSRF token of this session and a same-origin Origin', async () => {
    const { cookie } = await login(t);
    const id = await jobEnqueue(t.runtime.db, { type: 'csrf', payload: {} });
    await t.runtime.db.query(`update ai_jobs set status = 'failed', finished_at = now(), last_error = 'x' where id = $1`, [id]);
    const page = await t.app.inject({ url: `/admin/jobs/${id}`, headers: { cookie } });
    const csrf = csrfOf(page.body);

    const without = await t.app.inject({ method: 'POST', url: `/admin/jobs/${id}/retry`, headers: { cookie }, payload: {} });
    assert.equal(without.statusCode, 403);
    const other = await login(t);
    const otherSession = await t.app.inject({ method: 'POST', url: `/admin/jobs/${id}/retry`, headers: { cookie: other.cookie }, payload: { _csrf: csrf } });
    assert.equal(otherSession.statusCode, 403, 'a token from another session does not work');
    const crossSite = await t.app.inject({ method: 'POST', url: `/admin/jobs/${id}/retry`, headers: { cookie, origin: 'https://evil.example' }, payload: { _csrf: csrf } });
    assert.equal(crossSite.statusCode, 403);
    assert.equal((await jobGet(t.runtime.db, id))!.status, 'failed', 'nothing changed');

    // A bulk retry's bound that is not a time the count gave: refused, nothing retried.
    const badBound = await t.app.inject({ method: 'POST', url: '/admin/jobs/retry-failed', headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrf, type: 'csrf', failedBy: 'yesterday' } });
    assert.equal(badBound.statusCode, 303);
    assert.equal(new URL(String(badBound.headers.location), 'http://localhost').searchParams.get('problem'), 'Bad filter: must be the failedBy time the count gave');
    assert.equal((await jobGet(t.runtime.db, id))!.status, 'failed', 'nothing changed');

    const ok = await t.app.inject({ method: 'POST', url: `/admin/jobs/${id}/retry`, headers: { cookie, origin: 'http://localhost:80' }, payload: { _csrf: csrf } });
    assert.equal(ok.statusCode, 303);
    assert.equal((await jobGet(t.runtime.db, id))!.status, 'pending');
  });

  test('an upload over the limit is refused on its form\'s page with what to do, not as JSON', async () => {
    const { cookie } = await login(t);
    const imports = await t.app.inject({ url: '/admin/imports', headers: { cookie } });
    const csrf = csrfOf(imports.body);
    // ~17 MB of CSV is more than 20 MB as a form sends it (every ";" and line break as %XX).
    const csv = `Naam;Telefoon\r\n${'Medewerker 1;+31 6 12345678\r\n'.repeat(600_000)}`;
    for (const [url, fields, says] of [
      ['/admin/imports', { filename: 'big.csv', content: csv }, /aiq import-people/],
      ['/admin/documents', { title: 'Big', body: csv }, /add it in parts/],
    ] as const) {
      const payload = new URLSearchParams({ _csrf: csrf, ...fields }).toString();
      assert.ok(payload.length > 20 * 1024 * 1024);
      const refused = await t.app.inject({ method: 'POST', url, headers: { cookie, origin: 'http://localhost', 'content-type': 'application/x-www-form-urlencoded' }, payload });
      assert.equal(refused.statusCode, 303, refused.body.slice(0, 200));
      const shown = await t.app.inject({ url: String(refused.headers.location), headers: { cookie } });
      assert.equal(shown.statusCode, 200);
      assert.match(shown.body, /class="problem" role="alert">[^<]*too large/);
      assert.match(shown.body, says);
    }
    // Other errors on dashboard routes are the app's as before.
    assert.equal((await t.app.inject({ method: 'POST', url: '/admin/imports', headers: { cookie, origin: 'http://localhost', 'content-type': 'application/json' }, payload: '{' })).statusCode, 400);
  });

  test('user text in payloads and errors is escaped', async () => {
    const { cookie } = await login(t);
    const id = await jobEnqueue(t.runtime.db, { type: 'xss', payload: { body: '<script>alert(1)</script>' } });
    await t.runtime.db.query(`update ai_jobs set status = 'failed', finished_at = now(), last_error = '<img src=x onerror=alert(2)>' where id = $1`, [id]);
    for (const url of [`/admin/jobs/${id}`, '/admin/jobs?type=xss', '/admin/jobs?q=%3Cscript%3E', '/admin/jobs/retry-failed?q=%3Cb%3Ehi']) {
      const page = await t.app.inject({ url, headers: { cookie } });
      assert.equal(page.statusCode, 200, url);
      assert.doesNotMatch(page.body, /<script>alert|<img src=x|<b>hi/, url);
    }
    // A retried job counts its attempts anew; the page says so next to the history it keeps.
    await t.runtime.db.query(`update ai_jobs set attempts = 1, errors = '[{"error":"a"},{"error":"b"}]' where id = $1`, [id]);
    const detail = await t.app.inject({ url: `/admin/jobs/${id}`, headers: { cookie } });
    assert.match(detail.body, /<dt>attempts<\/dt><dd>1 of \d+ since the last retry \(2 failed in all, listed below\)<\/dd>/);
    // A throttled attempt given back is in the history but was never counted: no retry.
    await t.runtime.db.query(`update ai_jobs set attempts = 1, errors = '[{"error":"429","refunded":true},{"error":"b"}]' where id = $1`, [id]);
    const throttled = await t.app.inject({ url: `/admin/jobs/${id}`, headers: { cookie } });
    assert.match(throttled.body, /<dt>attempts<\/dt><dd>1 of \d+<\/dd>/);
    assert.match(detail.body, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(detail.body, /&lt;img src=x onerror=alert\(2\)&gt;/);
    // A notice quoting user text (a document's title) is escaped too.
    const form = await t.app.inject({ url: '/admin/documents', headers: { cookie } });
    const saved = await t.app.inject({ method: 'POST', url: '/admin/documents', headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(form.body), title: '<script>x</script>', body: 'Vakantiedagen: 25 per jaar.' } });
    assert.equal(saved.statusCode, 303, saved.body);
    const notice = await t.app.inject({ url: String(saved.headers.location), headers: { cookie } });
    assert.match(notice.body, /<div class="notice" role="status">&quot;&lt;script&gt;x&lt;\/script&gt;&quot; inserted/);
    assert.match(String(notice.headers['content-security-policy']), /default-src 'self'/);
    // A binary file (a NUL in it) gets the page's problem saying so, not the API's JSON; the
    // title stays in the form, the binary text does not come back.
    const binary = await t.app.inject({ method: 'POST', url: '/admin/documents', headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(form.body), title: 'scan', body: '%PDF-1.4\u0000binary' } });
    assert.equal(binary.statusCode, 400, binary.body);
    assert.match(binary.body, /document &quot;scan&quot; is not text \(binary content\)/);
    assert.match(binary.body, /<input name="title" required maxlength="300" value="scan">/);
    assert.doesNotMatch(binary.body, /PDF-1\.4/);
    // A text refused (headings only) comes back in the form with the problem: a redirect
    // emptied what was pasted (found by a new-user probe).
    const headings = await t.app.inject({ method: 'POST', url: '/admin/documents', headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(form.body), title: 'Kopjes', tags: 'hr', body: '# Verlof\n## Vakantie <b>\n' } });
    assert.equal(headings.statusCode, 400, headings.body);
    assert.match(headings.body, /<div class="problem"[^>]*>[^<]*heading/i);
    assert.match(headings.body, /value="Kopjes"/);
    assert.match(headings.body, /value="hr"/);
    assert.match(headings.body, /<textarea name="body" rows="8"># Verlof\n## Vakantie &lt;b&gt;\n<\/textarea>/);
    // A CSV with a NUL in one row starts its import, which reports that row.
    const imports = await t.app.inject({ url: '/admin/imports', headers: { cookie } });
    const started = await t.app.inject({ method: 'POST', url: '/admin/imports', headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(imports.body), filename: 'nul.csv', content: 'name,phone\nNul\u0000,+31633333333\n' } });
    assert.equal(started.statusCode, 303, started.body);
    assert.match(String(started.headers.location), /^\/admin\/imports\/[0-9a-f-]{36}\?notice=Import\+started/);
  });

  test("an action's notice shows after its own redirect only: a link from elsewhere cannot put text in the alert boxes", async () => {
    const { cookie } = await login(t);
    const id = await jobEnqueue(t.runtime.db, { type: 'flash', payload: {}, runAt: new Date(Date.now() + 3_600_000) });
    const page = await t.app.inject({ url: `/admin/jobs/${id}`, headers: { cookie } });
    const cancelled = await t.app.inject({ method: 'POST', url: `/admin/jobs/${id}/cancel`, headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(page.body) } });
    const location = String(cancelled.headers.location);
    assert.match(location, /notice=.*&sig=/);
    const shown = await t.app.inject({ url: location, headers: { cookie } });
    assert.match(shown.body, /<div class="notice" role="status">Cancelled: the job will not run.<\/div>/);

    const phishing = 'Your session expired: call +1 555 0100 and read out your admin token.';
    for (const url of [
      `/admin?notice=${encodeURIComponent(phishing)}`,
      `/admin?problem=${encodeURIComponent(phishing)}&sig=AAAAAAAAAAAAAAAAAAAAAA`,
      location.replace(/notice=[^&]*/, `notice=${encodeURIComponent(phishing)}`), // another text under a real signature
    ]) {
      const spoofed = await t.app.inject({ url, headers: { cookie } });
      assert.equal(spoofed.statusCode, 200, url);
      assert.doesNotMatch(spoofed.body, /call \+1 555|class="notice"|class="problem"/, url);
    }
    // Text moved from one field to the other under the same signature (a title may hold a line break).
    assert.doesNotMatch((await t.app.inject({ url: location.replace('notice=', 'problem='), headers: { cookie } })).body, /class="notice"|class="problem"/);
    // Signed for one session, not for another (a link copied out of one admin's history).
    const other = await login(t);
    assert.doesNotMatch((await t.app.inject({ url: location, headers: { cookie: other.cookie } })).body, /class="notice"/);
  });

  test("re-uploading a document from the dashboard with the Tags field left blank keeps its tags", async () => {
    const { cookie } = await login(t);
    const form = await t.app.inject({ url: '/admin/documents', headers: { cookie } });
    const save = (body: string, tags: string) =>
      t.app.inject({ method: 'POST', url: '/admin/documents', headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(form.body), title: 'HR handboek', body, tags } });
    assert.equal((await save('Vakantiedagen: 25 per jaar.', 'hr')).statusCode, 303);
    assert.equal((await save('Vakantiedagen: 26 per jaar.', '')).statusCode, 303);
    const tagsOf = async () => (await t.runtime.db.query<{ tags: string[] }>(`select tags from documents where title = 'HR handboek'`)).rows[0]!.tags;
    assert.deepEqual(await tagsOf(), ['hr'], 'a blank field is not "no tags"');
    assert.equal((await save('Vakantiedagen: 26 per jaar.', 'hr, it')).statusCode, 303);
    assert.deepEqual(await tagsOf(), ['hr', 'it']);
    // The API's empty list still clears them.
    const cleared = await t.app.inject({ method: 'POST', url: '/api/documents', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }, payload: { title: 'HR handboek', body: 'Vakantiedagen: 26 per jaar.', tags: [] } });
    assert.ok(cleared.statusCode < 300, cleared.body);
    assert.deepEqual(await tagsOf(), []);
  });

  test('a document is removed from its page (confirmed, audited) or with DELETE /api/documents/:id', async () => {
    const { cookie } = await login(t);
    const api = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const add = async (title: string) => (await t.app.inject({ method: 'POST', url: '/api/documents', headers: api, payload: { title, body: `${title}: dit beleid geldt niet meer.` } })).json().id as string;
    const first = await add('Oud beleid A');
    const page = await t.app.inject({ url: `/admin/documents/${first}`, headers: { cookie } });
    assert.match(page.body, /data-confirm="Remove &quot;Oud beleid A&quot;\? Replies stop using it at once; this cannot be undone\."/);
    const removed = await t.app.inject({ method: 'POST', url: `/admin/documents/${first}/remove`, headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(page.body) } });
    assert.equal(removed.statusCode, 303);
    assert.match((await t.app.inject({ url: String(removed.headers.location), headers: { cookie } })).body, /&quot;Oud beleid A&quot; removed: replies no longer use it\./);
    assert.equal((await t.app.inject({ url: `/admin/documents/${first}`, headers: { cookie } })).statusCode, 404);

    const second = await add('Oud beleid B');
    const deleted = await t.app.inject({ method: 'DELETE', url: `/api/documents/${second}`, headers: api });
    assert.deepEqual(deleted.json(), { id: second, title: 'Oud beleid B', removed: true });
    assert.equal((await t.app.inject({ method: 'DELETE', url: `/api/documents/${second}`, headers: api })).statusCode, 404);
    assert.equal((await t.app.inject({ method: 'DELETE', url: `/api/documents/${second}` })).statusCode, 401, 'needs the token');
    const chunks = await t.runtime.db.query('select 1 from document_chunks where document_id = any($1::uuid[])', [[first, second]]);
    assert.equal(chunks.rowCount, 0);
    await waitFor(async () => (await t.runtime.db.query(`select 1 from audit_log where action in ('POST /admin/documents/:id/remove', 'DELETE /api/documents/:id')`)).rowCount === 3, 'the removals audited');
  });

  test('the conversation list refreshed as contacts write: its "older" link (swapped with the rows) skips no one', async () => {
    const headers = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const write = async (from: string) => assert.equal((await t.app.inject({ method: 'POST', url: '/api/simulate', headers, payload: { from, body: 'Hallo' } })).statusCode, 201);
    const numbers = Array.from({ length: 55 }, (_, i) => `+3162000${String(i).padStart(4, '0')}`);
    for (const from of numbers) await write(from);
    const { cookie } = await login(t);
    // What the page script does every few seconds: read the first page again and swap its #live region in.
    const live = async (url: string) => {
      const body = (await t.app.inject({ url, headers: { cookie } })).body;
      const start = body.indexOf('<div id="live"');
      // Up to the region's own closing tag.
      let depth = 0;
      for (const tag of body.slice(start).matchAll(/<div\b|<\/div>/g)) {
        depth += tag[0] === '</div>' ? -1 : 1;
        if (depth === 0) return body.slice(start, start + tag.index! + tag[0].length);
      }
      throw new Error('no live region');
    };
    await live('/admin/conversations');
    // Three contacts far down the list write again: they move to the top.
    for (const from of numbers.slice(0, 3)) await write(from);
    const first = await live('/admin/conversations');
    const older = /<a href="([^"]+)">older »<\/a>/.exec(first);
    assert.ok(older, 'the refreshed region carries the link to the next page');
    const second = await live(older[1]!.replaceAll('&amp;', '&'));
    const ids = (html: string) => [...html.matchAll(/<tr><td><a href="\/admin\/conversations\/([0-9a-f-]{36})">/g)].map((m) => m[1]);
    const all = await t.runtime.db.query<{ id: string }>(`select id from conversations order by last_message_at desc, id desc`);
    assert.deepEqual([...ids(first), ...ids(second)], all.rows.map((r) => r.id));
  });

  test('bad filters and unknown jobs answer 400/404 pages', async () => {
    const { cookie } = await login(t);
    assert.equal((await t.app.inject({ url: '/admin/jobs?status=zzz', headers: { cookie } })).statusCode, 400);
    assert.equal((await t.app.inject({ url: '/admin/jobs?after=garbage', headers: { cookie } })).statusCode, 400);
    assert.equal((await t.app.inject({ url: '/admin/jobs/not-an-id', headers: { cookie } })).statusCode, 404);
    for (const query of ['status=bogus', `q=${'x'.repeat(201)}`, 'status=failed&status=done']) {
      const confirm = await t.app.inject({ url: `/admin/jobs/retry-failed?${query}`, headers: { cookie } });
      assert.equal(confirm.statusCode, 400, `retry-failed?${query.slice(0, 20)}: ${confirm.body.slice(0, 200)}`);
      assert.match(confirm.body, /Bad filter: /);
    }
  });
});

describe('dashboard without ADMIN_TOKEN', () => {
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp({ ADMIN_TOKEN: '' });
  });
  after(() => t.close());

  test('is open, says so, and still checks CSRF on posts', async () => {
    const page = await t.app.inject({ url: '/admin' });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /Open access/);
    const cookie = String(page.headers['set-cookie']).split(';')[0]!;
    const post = await t.app.inject({ method: 'POST', url: '/admin/jobs/retry-failed', headers: { cookie }, payload: {} });
    assert.equal(post.statusCode, 403);
    const ok = await t.app.inject({ method: 'POST', url: '/admin/jobs/retry-failed', headers: { cookie, origin: 'http://localhost' }, payload: { _csrf: csrfOf(page.body) } });
    assert.equal(ok.statusCode, 303);
    // A cookie that does not decode is no session: a new one is issued, no 500.
    const malformed = await t.app.inject({ url: '/admin', headers: { cookie: 'aiq_session=%' } });
    assert.equal(malformed.statusCode, 200);
    assert.match(String(malformed.headers['set-cookie']), /^aiq_session=v1\./);
  });

  test('the Simulate page is marked in the navigation, and simulating never renames an existing contact', async () => {
    const page = await t.app.inject({ url: '/admin/simulate' });
    assert.match(page.body, /<a href="\/admin\/simulate" class="active">Simulate<\/a>/);
    assert.doesNotMatch(page.body, /<a href="\/admin\/conversations" class="active">/);
    const cookie = String(page.headers['set-cookie']).split(';')[0]!;
    const headers = { cookie, origin: 'http://localhost' };
    const send = (name: string) =>
      t.app.inject({ method: 'POST', url: '/admin/simulate', headers, payload: { _csrf: csrfOf(page.body), from: '+31655500011', name, body: `hallo van ${name}` } });
    assert.equal((await send('Sanne')).statusCode, 303);
    assert.equal((await send('Someone Else')).statusCode, 303);
    const contact = await t.runtime.db.query<{ profile_name: string }>(`select profile_name from contacts where whatsapp_number = '+31655500011'`);
    assert.equal(contact.rows[0]!.profile_name, 'Sanne');
  });

  test('answers loopback host names only (no DNS rebinding into an open dashboard)', async () => {
    for (const host of ['127.0.0.1:3000', 'localhost', '[::1]:3000']) {
      assert.equal((await t.app.inject({ url: '/admin', headers: { host } })).statusCode, 200, host);
    }
    const page = await t.app.inject({ url: '/admin', headers: { host: 'attacker.example:3000' } });
    assert.equal(page.statusCode, 403);
    assert.match(page.body, /loopback/);
    const api = await t.app.inject({ url: '/api/stats', headers: { host: 'attacker.example' } });
    assert.equal(api.statusCode, 403);
    // A name that only looks like a loopback address is the attacker's own: it rebinds too.
    for (const host of ['127.0.0.1.rebind.attacker.example:3000', '127.attacker.example', 'localhost.attacker.example']) {
      const rebound = { host, 'sec-fetch-site': 'same-origin' };
      assert.equal((await t.app.inject({ url: '/admin', headers: rebound })).statusCode, 403, host);
      assert.equal((await t.app.inject({ url: '/api/backup', headers: { ...rebound, authorization: 'Bearer x' } })).statusCode, 403, host);
    }
  });
});

describe('/metrics', () => {
  let t: AdminApp;
  let worker: Worker;
  before(async () => {
    t = await startAdminApp();
    worker = new Worker({
      db: t.runtime.db,
      logger: createLogger('silent'),
      pollIntervalMs: 100,
      slowJobThresholdMs: 1,
      handlers: [
        { type: 'ok_job', schema: { safeParse: (d: unknown) => ({ success: true as const, data: d }) }, run: async () => new Promise((r) => setTimeout(r, 5)) },
        { type: 'bad_job', schema: { safeParse: (d: unknown) => ({ success: true as const, data: d }) }, run: async () => { throw new Error('nope'); } },
      ],
    });
    t.runtime.metrics.attachWorker(worker);
    await worker.start();
  });
  after(async () => {
    await worker.stop();
    await t.close();
  });

  test('exposes job gauges, worker timings and the outside-call metrics', async () => {
    const ok = await jobEnqueue(t.runtime.db, { type: 'ok_job', payload: {} });
    const bad = await jobEnqueue(t.runtime.db, { type: 'bad_job', payload: {}, maxAttempts: 1 });
    await waitFor(async () => (await jobGet(t.runtime.db, ok))!.status === 'done' && (await jobGet(t.runtime.db, bad))!.status === 'failed', 'jobs finished');
    t.runtime.metrics.observeTwilioCall('send', 120, 'ok');
    t.runtime.metrics.observeTwilioCall('send', 30, 'error');
    t.runtime.metrics.observeLlmCall('chat', 900, 'rate_limited');
    // An unsigned webhook is refused (403) and still timed.
    const webhook = await t.app.inject({ method: 'POST', url: '/webhooks/twilio/whatsapp', payload: 'Body=hi', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(webhook.statusCode, 403);
    const response = await t.app.inject({ url: '/metrics' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /text\/plain/);
    const text = response.body;
    for (const line of [
      'aiq_jobs{status="done",type="ok_job"} 1',
      'aiq_jobs{status="failed",type="bad_job"} 1',
      'aiq_jobs_scrape_ok 1',
      'aiq_job_duration_seconds_count{type="ok_job",outcome="done"} 1',
      'aiq_job_attempts_total{type="bad_job",outcome="failed"} 1',
      'aiq_job_failures_total{type="bad_job",final="true"} 1',
      'aiq_jobs_slow_total{type="ok_job"} 1',
      'aiq_twilio_call_duration_seconds_count{operation="send",outcome="ok"} 1',
      'aiq_twilio_call_errors_total{operation="send",outcome="error"} 1',
      'aiq_llm_call_errors_total{provider="local",operation="chat",outcome="rate_limited"} 1',
      'aiq_webhook_request_duration_seconds_count{route="/webhooks/twilio/whatsapp",status_code="403"} 1',
    ]) {
      assert.ok(text.includes(line), `metrics contain ${line}`);
    }
  });

  test('with the database gone a scrape says so and keeps no stale job counts', async () => {
    let gone = false;
    const db = {
      query: (text: string, values?: unknown[]) => (gone ? Promise.reject(new Error('connection refused')) : t.runtime.db.query(text, values)),
      exec: (sql: string) => t.runtime.db.exec(sql),
    } as typeof t.runtime.db;
    await jobEnqueue(t.runtime.db, { type: 'waiting_job', payload: {}, runAt: new Date(Date.now() + 3_600_000) });
    const metrics = new PromMetrics(db, 'local');
    assert.match((await metrics.scrape()).body, /aiq_jobs\{status="pending",type="waiting_job"\} 1/);
    gone = true;
    const body = (await metrics.scrape()).body;
    assert.match(body, /aiq_jobs_scrape_ok 0/);
    assert.doesNotMatch(body, /aiq_jobs\{/, 'no job counts from before');
    assert.match(body, /aiq_jobs_oldest_due_age_seconds nan/i); // prom-client writes "Nan", which Prometheus reads as NaN
  });
});

describe('dashboard on the embedded database (PGlite)', () => {
  test('every page and API read renders, with data in it', async () => {
    const t = await startEmbeddedAdminApp();
    try {
      const headers = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
      const simulated = await t.app.inject({ method: 'POST', url: '/api/simulate', headers, payload: { from: '+31612345678', body: 'Hallo' } });
      assert.equal(simulated.statusCode, 201);
      const { conversationId } = simulated.json();
      const done = await jobEnqueue(t.runtime.db, { type: 'x', payload: {} });
      await t.runtime.db.query(`update ai_jobs set status = 'done', attempts = 1, attempted_at = now() - interval '2 seconds', finished_at = now() where id = $1`, [done]);
      await t.app.inject({ method: 'POST', url: '/api/documents', headers, payload: { title: 'Doc', body: 'Some text.' } });
      await t.app.inject({ method: 'POST', url: '/api/imports', headers, payload: { filename: 'p.csv', content: 'name,phone\nA,+31611111111\n' } });
      const { cookie } = await login(t as AdminApp);
      for (const url of ['/admin', '/admin/jobs', `/admin/jobs/${done}`, '/admin/jobs/retry-failed', '/admin/conversations', `/admin/conversations/${conversationId}`, '/admin/simulate', '/admin/people', '/admin/documents', '/admin/imports']) {
        const response = await t.app.inject({ url, headers: { cookie } });
        assert.equal(response.statusCode, 200, `${url}: ${response.body.slice(0, 200)}`);
      }
      for (const url of ['/api/stats', '/api/jobs', '/api/conversations', '/api/people', '/api/documents', '/api/imports', '/metrics']) {
        assert.equal((await t.app.inject({ url, headers })).statusCode, 200, url);
      }
      const stats = (await t.app.inject({ url: '/api/stats', headers })).json();
      // The job's own minute (the last one, unless a minute ended since it finished).
      const { rows } = await t.runtime.db.query<{ minute: Date }>(`select date_trunc('minute', finished_at) as minute from ai_jobs where id = $1`, [done]);
      const minute = stats.lastHour.minutes.indexOf(new Date(rows[0]!.minute).toISOString());
      assert.ok(minute >= 0 && stats.lastHour.p50[minute] >= 1900, `duration percentiles computed on PGlite: ${JSON.stringify(stats.lastHour.p50.slice(-2))}`);
    } finally {
      await t.close();
    }
  });

  test('a backup taken through the API is in the audit log, as an export of one person is', async () => {
    const t = await startEmbeddedAdminApp();
    try {
      const backup = await t.app.inject({ url: '/api/backup', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
      assert.equal(backup.statusCode, 200);
      const { rows } = await t.runtime.db.query<{ actor: string; result: string; details: { bytes: number } }>(`select actor, result, details from audit_log where action = 'backup'`);
      assert.deepEqual(rows, [{ actor: 'api:token', result: 'ok', details: { bytes: backup.rawPayload.length } }]);
    } finally {
      await t.close();
    }
  });
});

test("AI costs on a database whose time zone is not UTC: today's cost has its bar", async () => {
  // A server set up in its country's zone (Debian's initdb takes the machine's): a day there
  // begins hours before or after a UTC day. A zone whose date differs from UTC's right now.
  const database = await freshServerDatabase();
  const zone = new Date().getUTCHours() >= 12 ? 'Pacific/Kiritimati' : 'Etc/GMT+12';
  const name = (await database.db.query<{ name: string }>('select current_database() as name')).rows[0]!.name;
  await database.db.query(`alter database ${name} set timezone = '${zone}'`);
  const t = await startAdminApp({}, database);
  try {
    await t.runtime.db.query(`insert into ai_usage (purpose, provider, model, operation, prompt_tokens, completion_tokens, total_tokens)
      values ('autoreply', 'openai', 'gpt-4o-mini', 'chat', 2000000, 500000, 2500000)`);
    const { cookie } = await login(t);
    const body = (await t.app.inject({ url: '/admin/usage?days=7', headers: { cookie } })).body;
    assert.match(body, /Last 7 days: <b>USD 0\.60<\/b>/);
    assert.match(body, /<title>cost \(USD\): 0\.6<\/title>/, `the day's bar (${zone})`);
  } finally {
    await t.close();
    await database.close();
  }
});

test('chart axes keep two significant digits: a day of AI costs in cents does not read 0.0', () => {
  assert.deepEqual([0, 5e-7, 0.00005, 0.0001, 0.25, 2.5, 12, 1500].map(formatTick), ['0', '0.0000005', '0.00005', '0.0001', '0.25', '2.5', '12', '1.5k']);
});
