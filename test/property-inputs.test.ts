// Property-based tests (fast-check) of the two doors anyone can knock on: the Twilio webhook
// and the admin API. Whatever the body, headers, encoding or size, the answer is never a
// 5xx, and the database never holds half a write (a message without its job, or a job
// without its message).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import twilio from 'twilio';
import { startAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';

const AUTH_TOKEN = 'property-test-auth-token';
const ACCOUNT_SID = `AC${'ab'.repeat(16)}`;
const PUBLIC_URL = 'https://aiq.example.test';
const WEBHOOK = '/webhooks/twilio/whatsapp';
const STATUS = '/webhooks/twilio/status';

let h: AdminApp;
before(async () => {
  h = await startAdminApp({ PUBLIC_URL, TWILIO_AUTH_TOKEN: AUTH_TOKEN, TWILIO_ACCOUNT_SID: ACCOUNT_SID, TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886', TWILIO_API_BASE_URL: 'http://127.0.0.1:9', AUTH_FAILURE_LIMIT: '10000' });
});
after(() => h.close());

async function assertNoHalfWrites(): Promise<void> {
  const { rows } = await h.runtime.db.query<{ inbound: number; jobs: number; orphans: number }>(
    `select (select count(*)::int from messages where source = 'inbound') as inbound,
            (select count(*)::int from ai_jobs where type = 'autoreply') as jobs,
            (select count(*)::int from messages m where m.source = 'inbound' and not exists (
               select 1 from ai_jobs j where j.type = 'autoreply' and j.payload->>'messageId' = m.id::text)) as orphans`,
  );
  assert.equal(rows[0]!.orphans, 0, 'every stored message has its job');
  assert.equal(rows[0]!.inbound, rows[0]!.jobs, 'every job has its message');
}

const twilioKeys = ['MessageSid', 'AccountSid', 'From', 'To', 'Body', 'NumMedia', 'MediaUrl0', 'MediaUrl1', 'ProfileName', 'WaId', 'MessageStatus', 'ErrorCode', 'ErrorMessage'];
const hex32 = fc.stringMatching(/^[0-9a-f]{32}$/);
/** Values that are sometimes right and often subtly wrong. */
const twilioValue = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  hex32.map((h) => `SM${h}`),
  fc.constant(ACCOUNT_SID),
  fc.integer({ min: 1_000_000, max: 999_999_999_999 }).map((n) => `whatsapp:+${n}`),
  fc.integer({ min: -5, max: 50 }).map(String),
  fc.constant('\u0000'),
  fc.webUrl(),
  // Over the body limit once encoded: 413.
  fc.constant('x'.repeat(70_000)),
);
const params = fc.dictionary(fc.oneof(fc.constantFrom(...twilioKeys), fc.string()), twilioValue, { maxKeys: 12 });

describe('webhook inputs', () => {
  test('random form posts, signed or not, never give a 5xx or a half write', async () => {
    await fc.assert(
      fc.asyncProperty(params, fc.constantFrom('good', 'none', 'wrong'), fc.constantFrom(WEBHOOK, STATUS), async (form, signing, path) => {
        const url = `${PUBLIC_URL}${path}`;
        const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
        if (signing === 'good') headers['x-twilio-signature'] = twilio.getExpectedTwilioSignature(AUTH_TOKEN, url, form);
        if (signing === 'wrong') headers['x-twilio-signature'] = 'bm90IGEgc2lnbmF0dXJl';
        const response = await h.app.inject({ method: 'POST', url: path, headers, payload: new URLSearchParams(form).toString() });
        assert.ok(response.statusCode < 500, `${response.statusCode} for ${JSON.stringify(form).slice(0, 200)}: ${response.body.slice(0, 200)}`);
        // Unsigned is refused (403), unless it is refused sooner for its size (413).
        if (signing !== 'good') assert.ok([403, 413].includes(response.statusCode), `unsigned got ${response.statusCode}`);
      }),
      { numRuns: 150, endOnFailure: true },
    );
    await assertNoHalfWrites();
  });

  test('valid messages with random text and media are stored with their job, once', async () => {
    await fc.assert(
      fc.asyncProperty(hex32, fc.string({ unit: 'binary', maxLength: 500 }), fc.integer({ min: 0, max: 2 }), fc.boolean(), async (sid, body, media, redeliver) => {
        const form: Record<string, string> = {
          MessageSid: `SM${sid}`, AccountSid: ACCOUNT_SID, From: 'whatsapp:+31612345678', To: 'whatsapp:+14155238886',
          Body: body.replaceAll('\u0000', ''), NumMedia: String(media),
        };
        for (let n = 0; n < media; n++) form[`MediaUrl${n}`] = `https://api.twilio.com/media/${sid}/${n}`;
        const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilio.getExpectedTwilioSignature(AUTH_TOKEN, `${PUBLIC_URL}${WEBHOOK}`, form) };
        for (let delivery = 0; delivery < (redeliver ? 2 : 1); delivery++) {
          const response = await h.app.inject({ method: 'POST', url: WEBHOOK, headers, payload: new URLSearchParams(form).toString() });
          assert.equal(response.statusCode, 200, response.body);
        }
        const stored = await h.runtime.db.query<{ body: string }>('select body from messages where twilio_sid = $1', [`SM${sid}`]);
        assert.equal(stored.rows.length, 1);
        assert.equal(stored.rows[0]!.body, form.Body);
      }),
      { numRuns: 60, endOnFailure: true },
    );
    await assertNoHalfWrites();
  });

  test('any content type, encoding or raw bytes: 4xx, never 5xx', async () => {
    const contentType = fc.oneof(
      fc.constantFrom('application/json', 'text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded; charset=latin1', 'application/xml', ''),
      fc.string(),
    );
    await fc.assert(
      fc.asyncProperty(contentType, fc.uint8Array({ maxLength: 3000 }), fc.constantFrom(WEBHOOK, STATUS), async (type, bytes, path) => {
        const headers: Record<string, string> = type ? { 'content-type': type } : {};
        const response = await h.app.inject({ method: 'POST', url: path, headers, payload: Buffer.from(bytes) });
        assert.ok(response.statusCode >= 400 && response.statusCode < 500, `${response.statusCode} for ${type}`);
      }),
      { numRuns: 150, endOnFailure: true },
    );
    await assertNoHalfWrites();
  });
});

describe('admin API inputs', () => {
  // "." and ".." are not ids but dot-segments: under URL rules they name another path (a 404).
  const ids = fc.oneof(fc.uuid(), fc.string().filter((id) => id !== '.' && id !== '..'), fc.constant('00000000-0000-0000-0000-000000000000'), fc.constant('%00'), fc.constant('..%2F..'));
  const routes = [
    'GET /api/stats', 'GET /api/jobs', 'GET /api/jobs/count', 'GET /api/jobs/:id', 'POST /api/jobs/:id/retry', 'POST /api/jobs/:id/cancel',
    'POST /api/jobs/retry-failed', 'GET /api/conversations', 'GET /api/conversations/:id', 'POST /api/conversations/:id/pause',
    'POST /api/conversations/:id/messages', 'POST /api/conversations/:id/suggest', 'GET /api/suggestions/:id', 'POST /api/suggestions/:id/send',
    'POST /api/suggestions/:id/discard', 'GET /api/people', 'GET /api/people/:id', 'GET /api/documents', 'POST /api/documents',
    'GET /api/imports', 'GET /api/imports/:id', 'POST /api/imports', 'POST /api/simulate',
  ];
  const jsonish = fc.oneof(fc.jsonValue(), fc.string(), fc.constant(undefined), fc.dictionary(fc.constantFrom('status', 'type', 'search', 'q', 'limit', 'after', 'body', 'paused', 'text', 'title', 'content', 'csv', 'from', 'filename'), fc.jsonValue()));
  const query = fc.dictionary(fc.constantFrom('status', 'type', 'search', 'q', 'limit', 'after', 'cursor', 'page'), fc.oneof(fc.string(), fc.integer().map(String)), { maxKeys: 4 });

  test('random ids, queries and bodies on every route: 2xx or 4xx with a message, never 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), ids, query, jsonish, fc.boolean(), async (route, id, q, body, asText) => {
        const [method, pattern] = route.split(' ') as ['GET' | 'POST', string];
        const url = `${pattern.replace(':id', encodeURIComponent(id))}?${new URLSearchParams(q)}`;
        const headers: Record<string, string> = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
        let payload: string | undefined;
        if (method === 'POST' && body !== undefined) {
          headers['content-type'] = asText ? 'text/plain' : 'application/json';
          payload = JSON.stringify(body);
        }
        const response = await h.app.inject({ method, url, headers, payload });
        assert.ok(response.statusCode < 500, `${route} ${url} ${payload?.slice(0, 200)} → ${response.statusCode} ${response.body.slice(0, 300)}`);
        if (response.statusCode >= 400) assert.match(String(response.headers['content-type'] ?? ''), /json/);
      }),
      { numRuns: 300, endOnFailure: true },
    );
    await assertNoHalfWrites();
  });

  test('without the token every route answers 401', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), ids, fc.option(fc.string()), async (route, id, token) => {
        const [method, pattern] = route.split(' ') as ['GET' | 'POST', string];
        const headers: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` };
        const response = await h.app.inject({ method, url: pattern.replace(':id', encodeURIComponent(id)), headers });
        assert.equal(response.statusCode, 401, `${route} without the token`);
      }),
      { numRuns: 100, endOnFailure: true },
    );
  });
});
