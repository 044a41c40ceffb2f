// The HTTP edge as an attacker meets it, over real HTTP (inject) on a real PostgreSQL
// database: other sites' requests through the admin's browser, forged X-Forwarded-*
// headers, guessing the admin token, and scraping metrics from elsewhere; and the front
// door a newcomer meets (GET /, the icon).
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/http/app.ts';
import { createLogger } from '../src/logger.ts';
import { jobEnqueue } from '../src/queue/index.ts';
import { startAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN } from './helpers/fake-twilio.ts';
import { inboundParams, signedForm } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const EVIL = 'https://evil.example';

/** Every (method, path) the app serves, read from fastify's own route tree. */
async function routeTable(app: FastifyInstance): Promise<Array<{ method: string; path: string }>> {
  await app.ready();
  const routes: Array<{ method: string; path: string }> = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^((?:│ {3}| {4})*)[├└]── (\S+) \(([A-Z, ]+)\)$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + match[2]!;
    stack[depth] = path;
    for (const method of match[3]!.split(', ')) routes.push({ method, path });
  }
  return routes;
}

/** What a state-changing request could have changed, as one comparable value. */
async function snapshot(t: AdminApp): Promise<string> {
  const result = await t.runtime.db.query(
    `select (select json_agg(json_build_object('id', id, 'status', status, 'updated', updated_at) order by id) from ai_jobs) as jobs,
            (select json_agg(json_build_object('id', id, 'paused', ai_paused) order by id) from conversations) as conversations,
            (select count(*) from messages) as messages,
            (select count(*) from documents) as documents,
            (select count(*) from imports) as imports,
            (select count(*) from suggestions) as suggestions`,
  );
  return JSON.stringify(result.rows[0]);
}

/** A request over a real socket with the Host header of our choosing (fetch would not let us set it). */
function requestWithHost(
  port: number,
  path: string,
  host: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: { ...options.headers, host } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end(options.body);
  });
}

/** A failed job and a conversation, so that a refused retry or pause would show. */
async function seed(t: AdminApp): Promise<{ jobId: string; conversationId: string }> {
  const jobId = await jobEnqueue(t.runtime.db, { type: 'edge_probe', payload: {} });
  await t.runtime.db.query(`update ai_jobs set status = 'failed', finished_at = now(), last_error = 'x' where id = $1`, [jobId]);
  const simulated = await t.app.inject({
    method: 'POST',
    url: '/api/simulate',
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    payload: { from: '+31611122233', body: 'hello from the edge test' },
  });
  assert.equal(simulated.statusCode, 201, simulated.body);
  const conversation = await t.runtime.db.query<{ id: string }>('select id from conversations limit 1');
  return { jobId, conversationId: conversation.rows[0]!.id };
}

/** A browser page on another site, in each way it can address us. */
const FOREIGN_REQUESTS: Array<{ name: string; headers: Record<string, string>; payload?: string }> = [
  { name: 'foreign Origin, no body', headers: { origin: EVIL } },
  { name: 'Origin: null', headers: { origin: 'null' } },
  { name: 'foreign Origin, text/plain body', headers: { origin: EVIL, 'content-type': 'text/plain' }, payload: '{"dryRun":false}' },
  { name: 'form post from another port of localhost', headers: { origin: 'http://localhost:8080', 'content-type': 'application/x-www-form-urlencoded' }, payload: 'paused=true' },
  { name: 'Sec-Fetch-Site: cross-site without Origin', headers: { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors' } },
];

for (const mode of ['open', 'token'] as const) {
  describe(`cross-site requests are refused (${mode} mode)`, () => {
    let t: AdminApp;
    let ids: { jobId: string; conversationId: string };
    // What our own page or script carries in this mode; refused anyway from another site.
    let credentials: Record<string, string>;
    before(async () => {
      t = await startAdminApp(mode === 'open' ? { ADMIN_TOKEN: '' } : {});
      ids = await seed(t);
      const page = await t.app.inject({ url: '/admin', headers: mode === 'open' ? {} : { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
      const cookie = mode === 'open' ? String(page.headers['set-cookie']).split(';')[0]! : '';
      credentials = mode === 'open' ? { cookie, 'x-csrf-token': /name="csrf-token" content="([^"]+)"/.exec(page.body)?.[1] ?? '' } : { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    });
    after(() => t.close());

    test('every state-changing /api and /admin route: 403 and nothing changed', async () => {
      const routes = (await routeTable(t.app)).filter((r) => !['GET', 'HEAD', 'OPTIONS'].includes(r.method) && /^\/(api|admin)\//.test(r.path));
      assert.ok(routes.length >= 20, `found only ${routes.length} state-changing routes`);
      const before = await snapshot(t);
      for (const route of routes) {
        const url = route.path.replace(/\/jobs\/:id/, `/jobs/${ids.jobId}`).replace(/\/conversations\/:id/, `/conversations/${ids.conversationId}`).replace(':id', ids.jobId);
        for (const attack of FOREIGN_REQUESTS) {
          for (const extra of [{}, credentials]) {
            const response = await t.app.inject({ method: route.method as 'POST', url, headers: { ...extra, ...attack.headers }, payload: attack.payload });
            assert.equal(response.statusCode, 403, `${route.method} ${url}, ${attack.name}${extra === credentials ? ', with credentials' : ''}: ${response.body}`);
          }
        }
      }
      assert.equal(await snapshot(t), before);
    });

    test('reads of personal data are refused to other sites; a link still opens the dashboard', async () => {
      for (const url of ['/api/conversations', `/api/conversations/${ids.conversationId}`, '/api/people', '/api/jobs']) {
        for (const headers of [{ origin: EVIL }, { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors' }, { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'no-cors' }]) {
          const response = await t.app.inject({ url, headers: { ...credentials, ...headers } });
          assert.equal(response.statusCode, 403, `${url} ${JSON.stringify(headers)}`);
        }
      }
      const link = await t.app.inject({ url: '/admin', headers: { ...credentials, 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' } });
      assert.notEqual(link.statusCode, 403);
    });

    test('a frame on another site is refused, and no /api address opens even as a link', async () => {
      const navigate = { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' };
      for (const url of ['/admin', `/admin/conversations/${ids.conversationId}`, '/api/backup', '/api/jobs', '/api/privacy/export?phone=%2B31611122233']) {
        for (const dest of ['iframe', 'frame', 'embed', 'object']) {
          const framed = await t.app.inject({ url, headers: { ...credentials, ...navigate, 'sec-fetch-dest': dest } });
          assert.equal(framed.statusCode, 403, `${url} in an ${dest}: ${framed.body}`);
        }
        // A navigation that does not say it is top-level (every browser that sends Sec-Fetch-Mode sends Dest).
        assert.equal((await t.app.inject({ url, headers: { ...credentials, ...navigate } })).statusCode, 403, `${url} without Sec-Fetch-Dest`);
      }
      for (const url of ['/api/backup', '/api/jobs', '/api/privacy/export?phone=%2B31611122233']) {
        const linked = await t.app.inject({ url, headers: { ...credentials, ...navigate, 'sec-fetch-dest': 'document' } });
        assert.equal(linked.statusCode, 403, `${url} as a top-level link: ${linked.body}`);
      }
      const exported = await t.runtime.db.query(`select 1 from audit_log where action = 'export'`);
      assert.equal(exported.rowCount, 0, 'no personal-data export ran');
    });

    test('our own requests still work', async () => {
      const own = mode === 'open' ? { ...credentials, origin: 'http://localhost', 'sec-fetch-site': 'same-origin' } : credentials;
      const url = mode === 'open' ? `/admin/conversations/${ids.conversationId}/pause` : `/api/conversations/${ids.conversationId}/pause`;
      const payload = mode === 'open' ? { paused: 'true', _csrf: credentials['x-csrf-token'] } : { paused: true };
      const response = await t.app.inject({ method: 'POST', url, headers: own, payload });
      assert.ok(response.statusCode < 400, `${response.statusCode} ${response.body}`);
      const paused = await t.runtime.db.query<{ ai_paused: boolean }>('select ai_paused from conversations where id = $1', [ids.conversationId]);
      assert.equal(paused.rows[0]!.ai_paused, true);
    });
  });
}

describe('open mode: the API needs a header no cross-site page can send', () => {
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp({ ADMIN_TOKEN: '' });
  });
  after(() => t.close());

  test('a bodyless POST without Authorization is 403; with any bearer it works', async () => {
    const bare = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed' });
    assert.equal(bare.statusCode, 403);
    assert.match(bare.json().error, /Authorization: Bearer/);
    const scripted = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: { authorization: 'Bearer local' }, payload: {} });
    assert.equal(scripted.statusCode, 200, scripted.body);
    assert.equal(scripted.json().retried, true);
    // Reads stay open on loopback.
    assert.equal((await t.app.inject({ url: '/api/stats' })).statusCode, 200);
  });

  test('a dashboard form without Origin or Sec-Fetch-Site is refused even with the CSRF token', async () => {
    const page = await t.app.inject({ url: '/admin' });
    const cookie = String(page.headers['set-cookie']).split(';')[0]!;
    const csrf = /name="csrf-token" content="([^"]+)"/.exec(page.body)![1]!;
    const scripted = await t.app.inject({ method: 'POST', url: '/admin/jobs/retry-failed', headers: { cookie }, payload: { _csrf: csrf } });
    assert.equal(scripted.statusCode, 403);
    const fromPage = await t.app.inject({ method: 'POST', url: '/admin/jobs/retry-failed', headers: { cookie, 'sec-fetch-site': 'same-origin' }, payload: { _csrf: csrf } });
    assert.equal(fromPage.statusCode, 303);
  });
});

describe('proxy trust is opt-in (TRUST_PROXY)', () => {
  let plain: AdminApp;
  let proxied: AdminApp;
  before(async () => {
    plain = await startAdminApp({ ADMIN_TOKEN: '' });
    // inject() connects from 127.0.0.1: that is the proxy here.
    proxied = await startAdminApp({ ADMIN_TOKEN: '', TRUST_PROXY: '127.0.0.1' }, plain.database);
  });
  after(async () => {
    await proxied.close();
    await plain.close();
  });

  test('X-Forwarded-Host does not get a rebinding host past the loopback check, TRUST_PROXY or not', async () => {
    for (const url of ['/api/conversations', '/admin']) {
      for (const app of [plain.app, proxied.app]) {
        // A rebinding page sends its own name as Host and may add X-Forwarded-Host itself:
        // with TRUST_PROXY that used to pass as "localhost" (found by a security probe).
        const forged = await app.inject({ url, headers: { host: 'evil.example', 'x-forwarded-host': 'localhost' } });
        assert.equal(forged.statusCode, 403, url);
        const rebound = await app.inject({ url, headers: { host: 'localhost', 'x-forwarded-host': 'evil.example' } });
        assert.equal(rebound.statusCode, 403, url);
      }
    }
  });

  test('open mode answers nothing a proxy or tunnel relayed, even under a loopback Host', async () => {
    // `ngrok http 3000 --host-header=rewrite` on this machine: a loopback connection and Host,
    // for anyone on the internet. Only the headers it adds say so; the whole API was open.
    const relays = [
      { 'x-forwarded-for': '192.0.2.2' },
      { forwarded: 'for=192.0.2.2' },
      { 'x-real-ip': '192.0.2.2' },
      { 'x-forwarded-proto': 'https' },
      { 'x-forwarded-port': '443' },
      { via: '1.1 proxy' },
      { 'cf-connecting-ip': '192.0.2.2' },
      { 'true-client-ip': '192.0.2.2' },
      { 'fly-client-ip': '192.0.2.2' },
      { 'x-client-ip': '192.0.2.2' },
      { 'x-original-forwarded-for': '192.0.2.2' },
      { 'tailscale-funnel-request': '?1' },
    ];
    for (const app of [plain.app, proxied.app]) {
      for (const relay of relays) {
        const headers = { host: 'localhost:3977', ...relay };
        const backup = await app.inject({ url: '/api/backup', headers });
        assert.equal(backup.statusCode, 403, JSON.stringify(relay));
        assert.match(backup.json().error, /not through a proxy or tunnel/);
        assert.equal((await app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: { ...headers, authorization: 'Bearer x' } })).statusCode, 403);
        assert.equal((await app.inject({ url: '/admin', headers })).statusCode, 403);
      }
      assert.equal((await app.inject({ url: '/api/stats', headers: { host: 'localhost:3977' } })).statusCode, 200, 'asked directly on this machine');
    }
  });

  test('X-Forwarded-Proto sets the Secure cookie flag only from a trusted proxy', async () => {
    // Behind a proxy the dashboard runs with ADMIN_TOKEN (open mode refuses relayed requests).
    const untrusted = await startAdminApp({}, plain.database);
    const trusted = await startAdminApp({ TRUST_PROXY: '127.0.0.1' }, plain.database);
    try {
      const login = (app: FastifyInstance) =>
        app.inject({ method: 'POST', url: '/admin/login', headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'localhost' }, payload: { token: TEST_ADMIN_TOKEN, next: '/admin' } });
      const plainCookie = await login(untrusted.app);
      assert.equal(plainCookie.statusCode, 303);
      assert.doesNotMatch(String(plainCookie.headers['set-cookie']), /Secure/);
      assert.match(String((await login(trusted.app)).headers['set-cookie']), /; Secure/);
    } finally {
      await trusted.close();
      await untrusted.close();
    }
  });

  test('behind a TLS proxy TRUST_PROXY does not name, a login from the https page still gets a Secure cookie', async () => {
    // nginx terminates TLS for https://aiq.example.com and passes the name on; TRUST_PROXY is
    // optional there. The browser's Origin says its page is https: a cookie without Secure
    // would go in clear text with any http:// link to the name (a network attacker's redirect).
    const proxiedTls = await startAdminApp({ PUBLIC_URL: 'https://aiq.example.com' }, plain.database);
    try {
      const login = (origin: string) =>
        proxiedTls.app.inject({
          method: 'POST',
          url: '/admin/login',
          headers: { host: 'aiq.example.com', origin, 'sec-fetch-site': 'same-origin', 'x-forwarded-proto': 'https', 'x-forwarded-for': '192.0.2.7' },
          payload: { token: TEST_ADMIN_TOKEN, next: '/admin' },
        });
      const overTls = await login('https://aiq.example.com');
      assert.equal(overTls.statusCode, 303, overTls.body);
      assert.match(String(overTls.headers['set-cookie']), /; Secure/);
      // A page served over plain http keeps a cookie it can use: one with Secure would be dropped.
      const overHttp = await login('http://aiq.example.com');
      assert.equal(overHttp.statusCode, 303, overHttp.body);
      assert.doesNotMatch(String(overHttp.headers['set-cookie']), /Secure/);
    } finally {
      await proxiedTls.close();
    }
  });
});

describe('failed admin authentication is rate-limited per client address', () => {
  let t: AdminApp;
  const LIMIT = 3;
  before(async () => {
    t = await startAdminApp({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_SECONDS: '600' });
  });
  after(() => t.close());

  const wrong = { authorization: 'Bearer wrong-token-guess' };
  const right = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
  const api = (remoteAddress: string, headers: Record<string, string>) => t.app.inject({ url: '/api/stats', headers, remoteAddress });

  test('bearer tokens: N failures get 401, the next attempt 429 with Retry-After; successes never count', async () => {
    for (let i = 0; i < 2 * LIMIT; i++) assert.equal((await api('192.0.2.1', right)).statusCode, 200);
    assert.equal((await api('192.0.2.1', {})).statusCode, 401, 'no token at all is not a guess');
    for (let i = 0; i < LIMIT; i++) assert.equal((await api('192.0.2.1', wrong)).statusCode, 401, `failure ${i + 1}`);
    const limited = await api('192.0.2.1', wrong);
    assert.equal(limited.statusCode, 429);
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(retryAfter > 0 && retryAfter <= 600, `Retry-After ${limited.headers['retry-after']}`);
    // Blocked means blocked: a guess that happens to be right must not tell the guesser so.
    assert.equal((await api('192.0.2.1', right)).statusCode, 429);
    // Another address is not affected, and a forged X-Forwarded-For does not make a new one.
    assert.equal((await api('192.0.2.2', right)).statusCode, 200);
    assert.equal((await api('192.0.2.1', { ...right, 'x-forwarded-for': '198.51.100.7' })).statusCode, 429);
  });

  test('IPv6: the addresses of one /64 share a budget, another /64 has its own', async () => {
    // Found by a security probe: each address counted apart, and a host holds a whole /64.
    for (let i = 1; i <= LIMIT; i++) assert.equal((await api(`2001:db8:aa::${i}`, wrong)).statusCode, 401);
    assert.equal((await api('2001:db8:aa::ffff', wrong)).statusCode, 429, 'a fresh address of the same /64');
    assert.equal((await api('2001:db8:aa:0:1:2:3:4', right)).statusCode, 429);
    assert.equal((await api('2001:db8:ab::1', right)).statusCode, 200, 'the next /64 is someone else');
  });

  test('dashboard logins: the N+1st failure within the window is 429', async () => {
    const login = (token: string) =>
      t.app.inject({ method: 'POST', url: '/admin/login', remoteAddress: '192.0.2.10', payload: { token, next: '/admin' } });
    for (let i = 0; i < LIMIT; i++) assert.equal((await login('not-the-token')).statusCode, 401);
    const limited = await login('not-the-token');
    assert.equal(limited.statusCode, 429);
    assert.ok(Number(limited.headers['retry-after']) > 0);
    assert.equal((await login(TEST_ADMIN_TOKEN)).statusCode, 429);
  });

  test('behind a proxy TRUST_PROXY does not name, the first failure warns that one client can lock every admin out', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', 'json', new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) }));
    const app = await buildApp({ ...t.runtime, logger });
    try {
      const proxied = (headers: Record<string, string>) => app.inject({ url: '/api/stats', headers: { ...wrong, ...headers }, remoteAddress: '127.0.0.1' });
      const warnings = () => lines.filter((line) => line.includes('TRUST_PROXY does not name'));
      await app.inject({ url: '/api/stats', headers: wrong, remoteAddress: '192.0.2.30' });
      assert.equal(warnings().length, 0, 'a direct client: nothing to say');
      await proxied({ 'x-forwarded-for': '198.51.100.7' });
      await proxied({ 'x-forwarded-for': '198.51.100.8' });
      assert.equal(warnings().length, 1, 'said once');
      assert.match(warnings()[0]!, /"ip":"127\.0\.0\.1".*set TRUST_PROXY/);
    } finally {
      await app.close();
    }
    // With the proxy named, the client's own address counts: no warning.
    const trusting = await startAdminApp({ TRUST_PROXY: '127.0.0.1' }, t.database);
    const trustedLines: string[] = [];
    const trustedApp = await buildApp({ ...trusting.runtime, logger: createLogger('info', 'json', new Writable({ write: (chunk, _encoding, done) => (trustedLines.push(String(chunk)), done()) })) });
    try {
      const failed = await trustedApp.inject({ url: '/api/stats', headers: { ...wrong, 'x-forwarded-for': '198.51.100.9' }, remoteAddress: '127.0.0.1' });
      assert.equal(failed.statusCode, 401);
      assert.equal(trustedLines.filter((line) => line.includes('TRUST_PROXY does not name')).length, 0);
    } finally {
      await trustedApp.close();
      await trusting.runtime.db.close();
    }
  });

  test('webhooks are not rate-limited by it', async () => {
    for (let i = 0; i <= LIMIT; i++) await api('192.0.2.20', wrong);
    const webhook = await t.app.inject({ method: 'POST', url: '/webhooks/twilio/whatsapp', remoteAddress: '192.0.2.20', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'Body=x' });
    assert.equal(webhook.statusCode, 403, 'unsigned webhook: 403 from the signature check, not 429');
  });
});

describe('token mode: a page that DNS-rebinds its own name to aiq', () => {
  // The admin's browser opens evil.test, whose DNS then points at aiq: the page's requests
  // are same-origin to the browser (no CORS, any header), come from the admin's own address
  // and carry Host: evil.test. Each wrong token it sends counted against that address.
  const LIMIT = 3;
  const PUBLIC = 'https://aiq.example.com';
  const METRICS_TOKEN = 'metrics-token-0123456789';
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_SECONDS: '600', PUBLIC_URL: PUBLIC, METRICS_TOKEN });
  });
  after(() => t.close());

  test('cannot spend the admin’s failure budget: its guesses are refused before they count', async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (t.app.server.address() as AddressInfo).port;
    const evil = `evil.test:${port}`;
    // What the page's fetch() and form carry (Sec-Fetch-* only where the browser sends them).
    const page = { origin: `http://${evil}`, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors' };
    for (let i = 0; i <= LIMIT; i++) {
      const api = await requestWithHost(port, '/api/stats', evil, { headers: { ...page, authorization: 'Bearer wrong-token-guess' } });
      assert.equal(api.status, 403, `API guess ${i + 1}: ${api.body}`);
      assert.match(api.body, /ALLOWED_HOSTS/);
      const login = await requestWithHost(port, '/admin/login', evil, {
        method: 'POST',
        headers: { ...page, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'token=wrong-token-guess&next=%2Fadmin',
      });
      assert.equal(login.status, 403, `login guess ${i + 1}: ${login.body}`);
      const metrics = await requestWithHost(port, '/metrics', evil, { headers: { authorization: 'Bearer wrong-token-guess' } });
      assert.equal(metrics.status, 403, `metrics guess ${i + 1}: ${metrics.body}`);
    }
    // The admin, from the same address, under the names aiq answers to: not locked out.
    const right = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'aiq.example.com']) {
      const answer = await requestWithHost(port, '/api/stats', host, { headers: right });
      assert.equal(answer.status, 200, `${host}: ${answer.body}`);
    }
    const login = await requestWithHost(port, '/admin/login', 'aiq.example.com', {
      method: 'POST',
      headers: { origin: PUBLIC, 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${TEST_ADMIN_TOKEN}&next=%2Fadmin`,
    });
    assert.equal(login.status, 303, login.body);
    assert.equal((await requestWithHost(port, '/metrics', `127.0.0.1:${port}`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status, 200);
  });

  test('names that only look like ours are foreign; every name a request carries must be ours', async () => {
    const wrong = { authorization: 'Bearer wrong-token-guess' };
    const right = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    for (const host of ['aiq.example.com.evil.test', 'evil-aiq.example.com', '127.0.0.1.evil.test', 'localhost.evil.test:3000', 'evil.test.', 'xn--aiq-example-com.test']) {
      for (const headers of [wrong, right]) {
        const answer = await t.app.inject({ url: '/api/stats', headers: { ...headers, host }, remoteAddress: '192.0.2.60' });
        assert.equal(answer.statusCode, 403, `${host}: ${answer.body}`);
      }
    }
    // A forged X-Forwarded-Host cannot make a foreign Host ours, and one that names a foreign
    // host is refused even without TRUST_PROXY: a proxy in front says what the browser asked for.
    assert.equal((await t.app.inject({ url: '/api/stats', headers: { ...right, host: 'evil.test', 'x-forwarded-host': 'aiq.example.com' } })).statusCode, 403);
    assert.equal((await t.app.inject({ url: '/api/stats', headers: { ...right, host: 'aiq.example.com', 'x-forwarded-host': 'evil.test' } })).statusCode, 403);
    assert.equal((await t.app.inject({ url: '/admin', headers: { host: 'evil.test' } })).statusCode, 403);
    // None of those counted: the address still has its whole budget.
    for (let i = 0; i < LIMIT; i++) assert.equal((await t.app.inject({ url: '/api/stats', headers: wrong, remoteAddress: '192.0.2.60' })).statusCode, 401);
    assert.equal((await t.app.inject({ url: '/api/stats', headers: wrong, remoteAddress: '192.0.2.60' })).statusCode, 429);
  });

  test('ours: PUBLIC_URL’s name, ALLOWED_HOSTS, IP addresses, localhost, a machine name; behind a proxy the name it reports', async () => {
    const right = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const named = await startAdminApp({ PUBLIC_URL: PUBLIC, ALLOWED_HOSTS: 'admin.example.org, .corp.example' }, t.database);
    const proxied = await startAdminApp({ PUBLIC_URL: PUBLIC, TRUST_PROXY: '127.0.0.1' }, t.database);
    try {
      const ours = ['AIQ.example.com:443', 'aiq.example.com.', 'admin.example.org:8443', 'corp.example', 'hr.corp.example', '10.0.0.5:3000', '[2001:db8::1]:3000', 'aiq:3000', 'localhost', 'app.localhost:3000'];
      for (const host of ours) assert.equal((await named.app.inject({ url: '/api/stats', headers: { ...right, host } })).statusCode, 200, host);
      for (const host of ['admin.example.org.evil.test', 'xcorp.example', 'evil.test']) {
        assert.equal((await named.app.inject({ url: '/api/stats', headers: { ...right, host } })).statusCode, 403, host);
      }
      // nginx's default: Host is the upstream's name, X-Forwarded-Host what the browser asked for.
      const behind = (host: string, forwarded: string) => proxied.app.inject({ url: '/api/stats', headers: { ...right, host, 'x-forwarded-host': forwarded }, remoteAddress: '127.0.0.1' });
      assert.equal((await behind('aiq:3000', 'aiq.example.com')).statusCode, 200);
      assert.equal((await behind('127.0.0.1:3000', 'aiq.example.com')).statusCode, 200);
      assert.equal((await behind('aiq:3000', 'evil.test')).statusCode, 403);
      // An nginx upstream or a Compose service named with an underscore (`upstream app_server`,
      // nginx's own example), passed on as Host by proxy_pass: a name of one label, ours.
      assert.equal((await behind('app_server', 'aiq.example.com')).statusCode, 200);
      assert.equal((await behind('aiq_web_1:3000', 'aiq.example.com')).statusCode, 200);
      // Caddy's: Host passed on; a page behind it adds a name of ours itself.
      assert.equal((await behind('evil.test', 'aiq.example.com')).statusCode, 403);
      assert.equal((await behind('aiq.example.com', 'aiq.example.com, evil.test')).statusCode, 403);
    } finally {
      await proxied.close();
      await named.close();
    }
  });

  // /readyz answered under any name, and said why it was not ready: a rebinding page read
  // the pending migrations by name (the version running), the database and, in a mismatch,
  // the embedding provider and model. Probes must keep their status code under any name.
  test('/readyz under a foreign name: the same status code, without the reasons; under ours, as before', async () => {
    if (!t.app.server.listening) await t.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (t.app.server.address() as AddressInfo).port;
    const readyz = async (host: string) => {
      const answer = await requestWithHost(port, '/readyz', host);
      return { status: answer.status, body: JSON.parse(answer.body) as Record<string, unknown> };
    };
    for (const host of ['evil.test', `evil.test:${port}`, 'aiq.example.com.evil.test']) {
      assert.deepEqual(await readyz(host), { status: 200, body: { status: 'ready' } }, host);
    }
    // Probes by a pod's IP, localhost, a container's name, and the public name: ours.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, '10.0.0.5:3000', 'aiq:3000', 'aiq.example.com']) {
      assert.deepEqual(await readyz(host), { status: 200, body: { status: 'ready', database: t.runtime.db.kind } }, host);
    }
    // A migration pending: not ready under every name, named only under ours.
    const removed = await t.runtime.db.query<{ version: number; name: string }>('delete from aiq_migrations where version = (select max(version) from aiq_migrations) returning version, name');
    try {
      const foreign = await requestWithHost(port, '/readyz', 'evil.test');
      assert.equal(foreign.status, 503);
      assert.deepEqual(JSON.parse(foreign.body), { status: 'not ready' });
      assert.equal((await t.app.inject({ url: '/readyz', headers: { host: 'aiq.example.com', 'x-forwarded-host': 'evil.test' } })).body, foreign.body, 'every name the request carries must be ours');
      assert.deepEqual(await readyz(`127.0.0.1:${port}`), { status: 503, body: { status: 'migrations pending', pending: [removed.rows[0]!.name] } });
    } finally {
      await t.runtime.db.query('insert into aiq_migrations (version, name) values ($1, $2)', [removed.rows[0]!.version, removed.rows[0]!.name]);
    }
    assert.equal((await readyz('evil.test')).status, 200);
  });

  test('the Twilio webhook answers under any name: its signature is the check', async () => {
    const m = await startAdminApp({ TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID, TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN, TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886' }, t.database);
    try {
      const path = '/webhooks/twilio/whatsapp';
      const form = signedForm(`http://webhooks.example.net${path}`, inboundParams('under a name aiq does not know'));
      const answer = await m.app.inject({ method: 'POST', url: path, headers: { ...form.headers, host: 'webhooks.example.net' }, payload: form.payload });
      assert.equal(answer.statusCode, 200, answer.body);
    } finally {
      await m.close();
    }
  });
});

test('no admin page or API read answers 500 to a bad query string', async () => {
  const t = await startAdminApp();
  try {
    const login = await t.app.inject({ method: 'POST', url: '/admin/login', payload: { token: TEST_ADMIN_TOKEN } });
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const reads = (await routeTable(t.app)).filter((r) => r.method === 'GET' && /^\/(api|admin)(\/|$)/.test(r.path));
    assert.ok(reads.length >= 20, `found only ${reads.length} admin reads`);
    for (const route of reads) {
      const url = route.path.replace(/:[a-z]+/g, '00000000-0000-4000-8000-000000000000');
      const headers = url.startsWith('/api') ? { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } : { cookie };
      for (const query of ['status=bogus', 'status=failed&status=done', `q=${'x'.repeat(5000)}`, 'after=%25zz', 'limit=-1&days=x', 'q[x]=1', 'next=/admin&next=/admin', 'after=a&after=b&days=7&days=30']) {
        const response = await t.app.inject({ url: `${url}?${query}`, headers });
        assert.ok(response.statusCode < 500, `${url}?${query.slice(0, 30)}: ${response.statusCode} ${response.body.slice(0, 200)}`);
      }
    }
  } finally {
    await t.close();
  }
});

test('text cut in the middle of an emoji is taken as text, not answered 500', async () => {
  // A script that shortens a text with JavaScript's slice cuts an emoji (two UTF-16 units)
  // in half, and JSON carries the lone half as "\ud83d": a document holding one was answered
  // 500 'internal error' (the database refused the chunks as JSON), with nothing to go on.
  const t = await startAdminApp();
  try {
    const cut = 'Opening hours 🕘 9 to 5. Parking 🅿️ behind the building 🚗'.slice(0, 58);
    assert.ok(/[\ud800-\udbff]$/.test(cut), 'the text ends in half an emoji');
    const response = await t.app.inject({
      method: 'POST',
      url: '/api/documents',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ title: `Office ${cut.slice(-1)}`, body: cut, tags: [`hours${cut.slice(-1)}`] }),
    });
    assert.equal(response.statusCode, 201, response.body);
    const stored = await t.runtime.db.query<{ content: string }>('select content from document_chunks');
    assert.equal(stored.rows.length, 1);
    assert.ok(stored.rows[0]!.content.endsWith('\ufffd'), 'the half is stored as U+FFFD, as any UTF-8 text with one');
  } finally {
    await t.close();
  }
});

describe('the audit log records what the gate let through, not what it refused', () => {
  const LIMIT = 3;
  const forged = '/api/jobs/forged-id-that-fills-the-log/retry';
  const missing = '00000000-0000-4000-8000-000000000000';
  const rows = async (t: AdminApp) =>
    (await t.runtime.db.query<{ actor: string; action: string; result: string }>('select actor, action, result from audit_log order by action, actor')).rows;

  test('token mode: no row for a request without or with a wrong token; failed logins up to the limit', async () => {
    const t = await startAdminApp({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_SECONDS: '600' });
    try {
      const right = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
      for (let i = 0; i < 50; i++) assert.equal((await t.app.inject({ method: 'POST', url: forged })).statusCode, 401);
      for (let i = 0; i < 2 * LIMIT; i++) {
        const guess = await t.app.inject({ method: 'POST', url: forged, headers: { authorization: 'Bearer wrong-token-guess' }, remoteAddress: '192.0.2.30' });
        assert.ok([401, 429].includes(guess.statusCode), String(guess.statusCode));
      }
      assert.equal((await t.app.inject({ method: 'POST', url: forged, headers: { ...right, origin: EVIL } })).statusCode, 403);
      assert.equal((await t.app.inject({ method: 'POST', url: `/admin/jobs/${missing}/retry`, headers: { origin: 'http://localhost' } })).statusCode, 401);
      for (let i = 0; i < 2 * LIMIT; i++) {
        const login = await t.app.inject({ method: 'POST', url: '/admin/login', remoteAddress: '192.0.2.31', payload: { token: 'not-the-token' } });
        assert.equal(login.statusCode, i < LIMIT ? 401 : 429);
      }
      assert.equal((await t.app.inject({ method: 'POST', url: `/api/jobs/${missing}/retry`, headers: right })).statusCode, 404);
      // Recorded once each response has gone out, in no set order: wait for as many as expected.
      await waitFor(async () => (await rows(t)).length >= LIMIT + 1, 'the failed logins and the admin action recorded');
      assert.deepEqual(await rows(t), [
        ...Array.from({ length: LIMIT }, () => ({ actor: 'dashboard:none', action: 'POST /admin/login', result: 'refused' })),
        { actor: 'api:token', action: 'POST /api/jobs/:id/retry', result: 'not_found' },
      ]);
    } finally {
      await t.close();
    }
  });

  test('an action whose client hung up before the answer is recorded all the same', async () => {
    // A script's time-out, a closed tab, or someone holding the token who hangs up on purpose:
    // the retry is done either way, so the log must say so.
    const t = await startAdminApp();
    try {
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      const port = (t.app.server.address() as AddressInfo).port;
      const { jobId } = await seed(t);
      // The job's row is held, so the retry waits in the database while the client hangs up.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const holding = t.runtime.db.transaction(async (tx) => {
        await tx.query('select 1 from ai_jobs where id = $1 for update', [jobId]);
        await held;
      });
      const blocked = () => t.runtime.db.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
      const request = httpRequest({ host: '127.0.0.1', port, path: `/api/jobs/${jobId}/retry`, method: 'POST', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
      request.on('error', () => {});
      request.end();
      await waitFor(async () => (await blocked()).rowCount! > 0, 'the retry waiting for the row');
      request.destroy();
      await new Promise((resolve) => setTimeout(resolve, 100));
      release();
      await holding;
      await waitFor(async () => (await t.runtime.db.query(`select 1 from ai_jobs where id = $1 and status = 'pending'`, [jobId])).rowCount === 1, 'the job retried');
      const audited = () => t.runtime.db.query(`select actor, result from audit_log where action = 'POST /api/jobs/:id/retry' and target = $1`, [jobId]);
      await waitFor(async () => (await audited()).rowCount! > 0, 'the retry in the audit log', 3000);
      assert.deepEqual((await audited()).rows, [{ actor: 'api:token', result: 'ok' }]);
    } finally {
      await t.close();
    }
  });

  test('open mode: no row for a request without the header, from another site or under a foreign host name', async () => {
    const t = await startAdminApp({ ADMIN_TOKEN: '' });
    try {
      for (let i = 0; i < 20; i++) assert.equal((await t.app.inject({ method: 'POST', url: forged })).statusCode, 403);
      assert.equal((await t.app.inject({ method: 'POST', url: forged, headers: { authorization: 'Bearer local', host: 'evil.test' } })).statusCode, 403);
      assert.equal((await t.app.inject({ method: 'POST', url: forged, headers: { authorization: 'Bearer local', 'sec-fetch-site': 'cross-site' } })).statusCode, 403);
      assert.equal((await t.app.inject({ method: 'POST', url: `/admin/jobs/${missing}/retry`, headers: { 'sec-fetch-site': 'cross-site' } })).statusCode, 403);
      assert.equal((await t.app.inject({ method: 'POST', url: `/api/jobs/${missing}/retry`, headers: { authorization: 'Bearer local' } })).statusCode, 404);
      await waitFor(async () => (await rows(t)).length > 0, 'the admin action recorded');
      assert.deepEqual(await rows(t), [{ actor: 'api:open', action: 'POST /api/jobs/:id/retry', result: 'not_found' }]);
    } finally {
      await t.close();
    }
  });
});

describe('/metrics is not public by accident', () => {
  test('without METRICS_TOKEN: clients on this machine only, not relayed ones', async () => {
    const t = await startAdminApp({ HOST: '0.0.0.0' });
    try {
      assert.equal((await t.app.inject({ url: '/metrics', remoteAddress: '127.0.0.1' })).statusCode, 200);
      assert.equal((await t.app.inject({ url: '/metrics', remoteAddress: '::ffff:127.0.0.1' })).statusCode, 200);
      const remote = await t.app.inject({ url: '/metrics', remoteAddress: '203.0.113.9' });
      assert.equal(remote.statusCode, 403);
      assert.match(remote.json().error, /METRICS_TOKEN/);
      const relayed = await t.app.inject({ url: '/metrics', remoteAddress: '127.0.0.1', headers: { 'x-forwarded-for': '203.0.113.9' } });
      assert.equal(relayed.statusCode, 403, 'a local proxy relaying an outside client');
    } finally {
      await t.close();
    }
  });

  test('without METRICS_TOKEN: a page that DNS-rebinds its own name to 127.0.0.1 is refused', async () => {
    const t = await startAdminApp({ ADMIN_TOKEN: '' });
    try {
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      const port = (t.app.server.address() as AddressInfo).port;
      // Over a real socket from this machine, as the browser of a rebinding page connects.
      const get = (host: string) => requestWithHost(port, '/metrics', host);
      const rebound = await get('evil.test');
      assert.equal(rebound.status, 403);
      assert.doesNotMatch(rebound.body, /aiq_jobs/);
      assert.equal((await get(`evil.test:${port}`)).status, 403);
      const local = await get(`127.0.0.1:${port}`);
      assert.equal(local.status, 200);
      assert.match(local.body, /aiq_jobs/);
      assert.equal((await get(`localhost:${port}`)).status, 200);
    } finally {
      await t.close();
    }
  });

  test('with TRUST_PROXY a relayed request is refused too, whatever it says about its client and host', async () => {
    // What a proxy reports can come from the client (a rebinding page can send
    // X-Forwarded-Host: localhost): behind a proxy, scrape with METRICS_TOKEN.
    const t = await startAdminApp({ TRUST_PROXY: '127.0.0.1' });
    try {
      for (const headers of [{ 'x-forwarded-for': '127.0.0.1' }, { 'x-forwarded-for': '203.0.113.9' }, { host: 'evil.test', 'x-forwarded-host': 'localhost' }]) {
        assert.equal((await t.app.inject({ url: '/metrics', remoteAddress: '127.0.0.1', headers })).statusCode, 403, JSON.stringify(headers));
      }
      assert.equal((await t.app.inject({ url: '/metrics', remoteAddress: '127.0.0.1' })).statusCode, 200);
    } finally {
      await t.close();
    }
  });

  test('with METRICS_TOKEN: the bearer token from anywhere, nothing without it', async () => {
    const t = await startAdminApp({ METRICS_TOKEN: 'metrics-token-0123456789' });
    try {
      assert.equal((await t.app.inject({ url: '/metrics', remoteAddress: '127.0.0.1' })).statusCode, 401);
      assert.equal((await t.app.inject({ url: '/metrics', remoteAddress: '203.0.113.9', headers: { authorization: 'Bearer wrong' } })).statusCode, 401);
      const scraped = await t.app.inject({ url: '/metrics', remoteAddress: '203.0.113.9', headers: { authorization: 'Bearer metrics-token-0123456789' } });
      assert.equal(scraped.statusCode, 200);
      assert.match(scraped.body, /aiq_jobs/);
    } finally {
      await t.close();
    }
  });

  test('with METRICS_TOKEN: wrong tokens count against the address like the admin token, and the right one waits too', async () => {
    // Found by a security probe: 300 wrong guesses were answered 401 each, unslowed.
    const t = await startAdminApp({ METRICS_TOKEN: 'metrics-token-0123456789', AUTH_FAILURE_LIMIT: '3', AUTH_FAILURE_WINDOW_SECONDS: '600' });
    try {
      const scrape = (token: string, remoteAddress = '203.0.113.10') => t.app.inject({ url: '/metrics', remoteAddress, headers: { authorization: `Bearer ${token}` } });
      for (let guess = 0; guess < 3; guess++) assert.equal((await scrape(`guess-${guess}`)).statusCode, 401);
      const blocked = await scrape('guess-3');
      assert.equal(blocked.statusCode, 429);
      assert.ok(Number(blocked.headers['retry-after']) > 0);
      assert.equal((await scrape('metrics-token-0123456789')).statusCode, 429, 'guessing right after the limit tells nothing');
      assert.equal((await scrape('metrics-token-0123456789', '203.0.113.11')).statusCode, 200, 'another address scrapes as before');
    } finally {
      await t.close();
    }
  });
  test('with METRICS_TOKEN: a request without a token is no guess, so another site cannot lock the admin out with it', async () => {
    // Any page in the admin's browser can load <img src="http://aiq:3000/metrics"> under aiq's
    // own name, as often as it likes, without a token: each counted as a wrong one, and past
    // the limit the admin's own /api and /admin answered 429 (found by a security probe).
    const t = await startAdminApp({ METRICS_TOKEN: 'metrics-token-0123456789', AUTH_FAILURE_LIMIT: '3', AUTH_FAILURE_WINDOW_SECONDS: '600' });
    try {
      const admin = '203.0.113.12';
      for (let i = 0; i < 6; i++) {
        const image = await t.app.inject({ url: '/metrics', remoteAddress: admin, headers: { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'image' } });
        assert.equal(image.statusCode, 401, `request ${i + 1}`);
      }
      assert.equal((await t.app.inject({ url: '/api/stats', remoteAddress: admin, headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).statusCode, 200);
      assert.equal((await t.app.inject({ url: '/metrics', remoteAddress: admin, headers: { authorization: 'Bearer metrics-token-0123456789' } })).statusCode, 200);
    } finally {
      await t.close();
    }
  });
});

describe('the front door', () => {
  test('GET / leads to the dashboard; /favicon.ico is an icon, not a 404', async () => {
    const t = await startAdminApp({ ADMIN_TOKEN: '' });
    try {
      const root = await t.app.inject({ url: '/' });
      assert.equal(root.statusCode, 302);
      assert.equal(root.headers.location, '/admin');
      const icon = await t.app.inject({ url: '/favicon.ico' });
      assert.equal(icon.statusCode, 200);
      assert.match(String(icon.headers['content-type']), /^image\/svg\+xml/);
      assert.match(icon.body, /^<svg /);
      assert.match((await t.app.inject({ url: '/admin' })).body, /<link rel="icon" href="\/favicon.ico"/);
    } finally {
      await t.close();
    }
  });

  // Routed by the decoded path, the answer holds the same personal data; the header was set
  // by a test of the raw URL, and the audit log named the caller dashboard:none (found by a
  // privacy probe).
  test('an API path spelled with an escape (/%61pi/…) is answered as /api/… is: not cached, audited as the API', async () => {
    const t = await startAdminApp();
    try {
      const bearer = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
      for (const url of ['/api/conversations', '/%61pi/conversations', '/%61pi/people']) {
        const answer = await t.app.inject({ url, headers: bearer });
        assert.equal(answer.statusCode, 200, url);
        assert.equal(answer.headers['cache-control'], 'no-store', url);
      }
      assert.equal((await t.app.inject({ url: '/%61pi/conversations' })).statusCode, 401, 'the gate held already');
      const { jobId } = await seed(t);
      const retried = await t.app.inject({ method: 'POST', url: `/%61pi/jobs/${jobId}/retry`, headers: bearer });
      assert.equal(retried.statusCode, 200, retried.body);
      // Written as the response ends.
      const audited = () => t.runtime.db.query<{ actor: string }>(`select actor from audit_log where action = 'POST /api/jobs/:id/retry'`);
      await waitFor(async () => (await audited()).rowCount > 0, 'the audit record');
      assert.deepEqual((await audited()).rows, [{ actor: 'api:token' }]);
    } finally {
      await t.close();
    }
  });
});

// Fastify turns Node's bound on receiving a request off: a client that sent its headers and
// then stalled (slowloris) held its connection open for good, and enough of them exhaust the
// process's sockets. Found by a security probe: still open after 400 s.
test('a client that stalls halfway through its request is answered 408 and disconnected', async () => {
  const t = await startAdminApp({ HTTP_REQUEST_TIMEOUT_SECONDS: '1' });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const port = (t.app.server.address() as AddressInfo).port;
  const socket = connect(port, '127.0.0.1');
  try {
    let answer = '';
    let closed = false;
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    socket.write(`POST /webhooks/twilio/whatsapp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nFrom=what`);
    await waitFor(() => closed, 'the stalled connection to be closed', 60_000);
    assert.match(answer, /^HTTP\/1\.1 408 /);
  } finally {
    socket.destroy();
    await t.close();
  }
});
