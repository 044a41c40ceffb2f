// The inbound WhatsApp webhook and the status callback, over real HTTP (inject) on real
// PostgreSQL (and the embedded database where it applies): signatures, one transaction,
// redelivery, bad input, and delivery status updates.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { after, before, beforeEach, describe, test } from 'node:test';
import { jobEnqueueUnnotified, jobList } from '../src/queue/index.ts';
import { BACKENDS, freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { FAKE_ACCOUNT_SID } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messageSid, messagingEnv, signedForm, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
const STATUS = '/webhooks/twilio/status';

async function counts(t: TestDatabase): Promise<{ contacts: number; conversations: number; messages: number; jobs: number }> {
  const result = await t.db.query<{ contacts: number; conversations: number; messages: number; jobs: number }>(`
    select (select count(*)::int from contacts) as contacts, (select count(*)::int from conversations) as conversations,
           (select count(*)::int from messages) as messages, (select count(*)::int from ai_jobs) as jobs`);
  return result.rows[0]!;
}

const NOTHING = { contacts: 0, conversations: 0, messages: 0, jobs: 0 };

describe('inbound webhook (PostgreSQL server)', () => {
  let t: TestDatabase;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    m = await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9'));
  });
  after(async () => {
    await m.close();
    await t.close();
  });
  beforeEach(async () => {
    await t.db.exec('delete from ai_jobs; delete from messages; delete from conversations; delete from contacts;');
  });

  test('a webhook signed as Twilio signs it is stored with its job, and answered with empty TwiML', async () => {
    const params = inboundParams('Hoe laat gaat de kantine open?');
    const response = await injectSigned(m.app, WHATSAPP, params);
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/xml/);
    assert.equal(response.body, '<Response/>');

    const message = (await t.db.query<Record<string, unknown>>(`
      select m.*, k.whatsapp_number, k.profile_name from messages m
      join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id`)).rows;
    assert.equal(message.length, 1);
    assert.equal(message[0]!.body, 'Hoe laat gaat de kantine open?');
    assert.equal(message[0]!.twilio_sid, params.MessageSid);
    assert.equal(message[0]!.source, 'inbound');
    assert.equal(message[0]!.direction, 'inbound');
    assert.equal(message[0]!.status, 'received');
    assert.equal(message[0]!.whatsapp_number, '+31612345678');
    assert.equal(message[0]!.profile_name, 'Anna');

    const { jobs } = await jobList(t.db, {}, { limit: 10 });
    assert.equal(jobs.length, 1);
    assert.equal(jobs[0]!.type, 'autoreply');
    assert.deepEqual(jobs[0]!.payload, { messageId: message[0]!.id, conversationId: message[0]!.conversation_id });
    assert.equal(jobs[0]!.orderingKey, message[0]!.conversation_id);
  });

  test("the webhook's job is the one the queue's own insert writes (aiq_inbound_store mirrors it)", async () => {
    const response = await injectSigned(m.app, WHATSAPP, inboundParams('Zelfde job?'));
    assert.equal(response.statusCode, 200);
    const columns = `type, payload, status, priority, attempts, max_attempts, ordering_key, errors, result, locked_by, locked_until,
                     attempted_at, finished_at, last_error, job_key, next_run_at = created_at as due_at_creation`;
    const webhookJob = (await t.db.query<Record<string, unknown>>(`select ${columns} from ai_jobs`)).rows[0]!;
    const payload = webhookJob.payload as { messageId: string; conversationId: string };
    await t.db.exec('delete from ai_jobs');
    await jobEnqueueUnnotified(t.db, { type: 'autoreply', payload, orderingKey: payload.conversationId, maxAttempts: webhookJob.max_attempts as number });
    const queueJob = (await t.db.query<Record<string, unknown>>(`select ${columns} from ai_jobs`)).rows[0]!;
    assert.deepEqual(webhookJob, queueJob);
  });

  test('media URLs are stored; a second message reuses contact and conversation and keeps the known name', async () => {
    const first = inboundParams('foto', '+31612345678', { NumMedia: '2', MediaUrl0: 'https://api.twilio.com/m/1', MediaUrl1: 'https://api.twilio.com/m/2', MediaContentType0: 'image/jpeg' });
    assert.equal((await injectSigned(m.app, WHATSAPP, first)).statusCode, 200);
    const second = inboundParams('nog een', '+31612345678');
    delete (second as Record<string, string | undefined>).ProfileName;
    assert.equal((await injectSigned(m.app, WHATSAPP, second)).statusCode, 200);
    assert.deepEqual(await counts(t), { contacts: 1, conversations: 1, messages: 2, jobs: 2 });
    const rows = (await t.db.query<{ media_urls: string[] }>(`select media_urls from messages order by created_at`)).rows;
    assert.deepEqual(rows[0]!.media_urls, ['https://api.twilio.com/m/1', 'https://api.twilio.com/m/2']);
    assert.equal((await t.db.query<{ profile_name: string }>('select profile_name from contacts')).rows[0]!.profile_name, 'Anna');
  });

  test('an empty or blank ProfileName keeps the name the contact is known by', async () => {
    // Twilio posts ProfileName empty when WhatsApp gives no name; the name known from an
    // earlier message was overwritten with it, and a template that fills {{1}} with the
    // name then held every reply outside the window ("WhatsApp gave no profile name").
    assert.equal((await injectSigned(m.app, WHATSAPP, inboundParams('Hoi', '+31612345678'))).statusCode, 200);
    for (const blank of ['', '   ']) {
      assert.equal((await injectSigned(m.app, WHATSAPP, inboundParams('nog een', '+31612345678', { ProfileName: blank }))).statusCode, 200);
      assert.equal((await t.db.query<{ profile_name: string }>('select profile_name from contacts')).rows[0]!.profile_name, 'Anna', `after ProfileName ${JSON.stringify(blank)}`);
    }
    // A contact who never gave a name has none: not an empty string.
    assert.equal((await injectSigned(m.app, WHATSAPP, inboundParams('Hallo', '+31612345679', { ProfileName: '' }))).statusCode, 200);
    assert.equal((await t.db.query<{ profile_name: string | null }>(`select profile_name from contacts where whatsapp_number = '+31612345679'`)).rows[0]!.profile_name, null);
    // A new name replaces the old one.
    assert.equal((await injectSigned(m.app, WHATSAPP, inboundParams('weer', '+31612345678', { ProfileName: 'Anna de Vries' }))).statusCode, 200);
    assert.equal((await t.db.query<{ profile_name: string }>(`select profile_name from contacts where whatsapp_number = '+31612345678'`)).rows[0]!.profile_name, 'Anna de Vries');
  });

  test('wrong, missing, changed-parameter and other-URL signatures: 403 and nothing stored', async () => {
    const params = inboundParams('hallo');
    const good = signedForm(`http://localhost:80${WHATSAPP}`, params);

    const wrong = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: { ...good.headers, 'x-twilio-signature': 'AAAAAAAAAAAAAAAAAAAAAAAAAAA=' }, payload: good.payload });
    const { 'x-twilio-signature': _drop, ...unsignedHeaders } = good.headers;
    const missing = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: unsignedHeaders, payload: good.payload });
    const changed = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: good.headers, payload: new URLSearchParams({ ...params, Body: 'hallo!' }).toString() });
    const otherUrl = await injectSigned(m.app, WHATSAPP, params, { signedUrl: `https://evil.example${WHATSAPP}` });
    const otherToken = await injectSigned(m.app, WHATSAPP, params, { token: 'not-the-auth-token' });
    for (const [name, response] of Object.entries({ wrong, missing, changed, otherUrl, otherToken })) {
      assert.equal(response.statusCode, 403, name);
    }
    assert.match(missing.json().error, /missing X-Twilio-Signature/);
    assert.deepEqual(await counts(t), NOTHING);
  });

  test('the same MessageSid delivered again, even concurrently: one message, one job, every answer 200', async () => {
    const params = inboundParams('dubbel?');
    const responses = [await injectSigned(m.app, WHATSAPP, params), ...(await Promise.all([1, 2, 3, 4, 5].map(() => injectSigned(m.app, WHATSAPP, params))))];
    for (const response of responses) {
      assert.equal(response.statusCode, 200);
      assert.equal(response.body, '<Response/>');
    }
    assert.deepEqual(await counts(t), { contacts: 1, conversations: 1, messages: 1, jobs: 1 });
  });

  test('message and job are one transaction: when the enqueue fails, no message, contact or conversation remains', async () => {
    await t.db.exec(`
      create function test_refuse_job() returns trigger language plpgsql as $$ begin raise exception 'enqueue refused by test'; end $$;
      create trigger test_refuse_job before insert on ai_jobs for each row execute function test_refuse_job();`);
    try {
      const response = await injectSigned(m.app, WHATSAPP, inboundParams('verloren?'));
      assert.equal(response.statusCode, 500);
      assert.deepEqual(response.json(), { error: 'internal error' });
      assert.deepEqual(await counts(t), NOTHING);
    } finally {
      await t.db.exec('drop trigger test_refuse_job on ai_jobs; drop function test_refuse_job();');
    }
  });

  test('malformed (400), oversized (413) and wrong content type (415): nothing stored, server still healthy', async () => {
    const malformed: Record<string, Record<string, string>> = {
      'no MessageSid': (({ MessageSid: _, ...rest }) => rest)(inboundParams('x')),
      'bad MessageSid': inboundParams('x', '+31612345678', { MessageSid: 'SM123' }),
      'From not whatsapp': inboundParams('x', '+31612345678', { From: '+31612345678' }),
      'From not a number': inboundParams('x', '+31612345678', { From: 'whatsapp:+abc' }),
      'NumMedia without MediaUrl': inboundParams('x', '+31612345678', { NumMedia: '1' }),
      'NumMedia not a number': inboundParams('x', '+31612345678', { NumMedia: 'many' }),
      'NUL in Body': inboundParams('a\u0000b'),
      'empty form': {},
    };
    for (const [name, params] of Object.entries(malformed)) {
      const response = await injectSigned(m.app, WHATSAPP, params);
      assert.equal(response.statusCode, 400, `${name}: ${response.body}`);
      assert.match(response.json().error, /malformed/, name);
    }
    // A repeated parameter is not Twilio's shape either.
    const repeated = inboundParams('x');
    const form = signedForm(`http://localhost:80${WHATSAPP}`, repeated);
    const twice = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: form.headers, payload: `${form.payload}&From=whatsapp%3A%2B31600000000` });
    assert.ok([400, 403].includes(twice.statusCode), `repeated parameter: ${twice.statusCode}`);

    const huge = inboundParams('x'.repeat(m.runtime.config.WEBHOOK_BODY_LIMIT_BYTES + 10));
    assert.equal((await injectSigned(m.app, WHATSAPP, huge)).statusCode, 413);

    const params = inboundParams('json?');
    const json = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: { 'content-type': 'application/json', 'x-twilio-signature': signedForm(`http://localhost:80${WHATSAPP}`, params).headers['x-twilio-signature']! }, payload: JSON.stringify(params) });
    assert.equal(json.statusCode, 415);
    const plain = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: { 'content-type': 'text/plain' }, payload: 'Body=hi' });
    assert.equal(plain.statusCode, 415);

    assert.deepEqual(await counts(t), NOTHING);
    assert.equal((await m.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    assert.equal((await m.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    assert.equal((await injectSigned(m.app, WHATSAPP, inboundParams('nog steeds gezond'))).statusCode, 200);
    assert.equal((await counts(t)).messages, 1);
  });

  test('any signed form, however odd, gets 200 or 400, never a 5xx; 200 only when it was stored', async () => {
    const keys = fc.constantFrom('MessageSid', 'AccountSid', 'From', 'To', 'Body', 'NumMedia', 'MediaUrl0', 'ProfileName', 'WaId', 'x');
    const value = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.constantFrom('whatsapp:+31612345678', '0', '1', '11', '-1', 'https://x.example/a', '\u0000', messageSid(), FAKE_ACCOUNT_SID));
    await fc.assert(
      fc.asyncProperty(fc.dictionary(keys, value, { maxKeys: 10 }), async (overrides) => {
        const params = { ...inboundParams('prop'), ...overrides };
        const before = await counts(t);
        const response = await injectSigned(m.app, WHATSAPP, params);
        assert.ok([200, 400].includes(response.statusCode), `${response.statusCode} ${response.body} for ${JSON.stringify(params)}`);
        const now = await counts(t);
        if (response.statusCode === 400) assert.deepEqual(now, before, 'a 400 stores nothing');
        else assert.equal(now.jobs, now.messages, 'a 200 has stored the message (or had before) with its job');
      }),
      { numRuns: 150 },
    );
  });

  test('status callbacks move an outbound message forward, never back, and say plainly what 63016 means', async () => {
    await injectSigned(m.app, WHATSAPP, inboundParams('vraag'));
    const { id: conversationId } = (await t.db.query<{ id: string }>('select id from conversations')).rows[0]!;
    const sid = messageSid();
    const { id } = (await t.db.query<{ id: string }>(
      `insert into messages (conversation_id, source, body, status, send_started_at) values ($1, 'ai', 'antwoord', 'pending', now()) returning id`,
      [conversationId],
    )).rows[0]!;
    const callback = (status: string, extra: Record<string, string> = {}, path = `${STATUS}?messageId=${id}`) =>
      injectSigned(m.app, path, { AccountSid: FAKE_ACCOUNT_SID, MessageSid: sid, MessageStatus: status, ApiVersion: '2010-04-01', ...extra });
    const row = async () => (await t.db.query<{ status: string; twilio_sid: string | null; error_code: number | null; error_message: string | null }>('select status, twilio_sid, error_code, error_message from messages where id = $1', [id])).rows[0]!;

    // Found by our id (its sender never learned the SID), confirmed with the SID.
    assert.equal((await callback('sent')).statusCode, 200);
    assert.deepEqual(await row(), { status: 'sent', twilio_sid: sid, error_code: null, error_message: null });
    // By SID alone from now on; out of order is ignored.
    assert.equal((await callback('read', {}, STATUS)).body, '<Response/>');
    assert.equal((await callback('delivered', {}, STATUS)).statusCode, 200);
    assert.equal((await row()).status, 'read');
    // A status Twilio may add some day: acknowledged, nothing changes.
    assert.equal((await callback('partially_delivered', {}, STATUS)).statusCode, 200);
    assert.equal((await row()).status, 'read');
    // Unsigned: refused.
    const unsigned = await m.app.inject({ method: 'POST', url: STATUS, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `MessageSid=${sid}&MessageStatus=failed` });
    assert.equal(unsigned.statusCode, 403);
    // Malformed: 400.
    assert.equal((await callback('sent', {}, `${STATUS}?messageId=not-a-uuid`)).statusCode, 400);
    assert.equal((await injectSigned(m.app, STATUS, { MessageStatus: 'sent' })).statusCode, 400);

    // A second reply that Twilio took but could not deliver: outside the 24-hour window.
    const sid2 = messageSid();
    await t.db.query(`insert into messages (conversation_id, source, body, status, twilio_sid) values ($1, 'ai', 'te laat', 'queued', $2)`, [conversationId, sid2]);
    assert.equal((await injectSigned(m.app, STATUS, { AccountSid: FAKE_ACCOUNT_SID, MessageSid: sid2, MessageStatus: 'failed', ErrorCode: '63016' })).statusCode, 200);
    const failed = (await t.db.query<{ status: string; error_code: number; error_message: string }>('select status, error_code, error_message from messages where twilio_sid = $1', [sid2])).rows[0]!;
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error_code, 63016);
    assert.match(failed.error_message, /outside WhatsApp's 24-hour window: a free-form reply is impossible/);
  });
});

describe('signatures behind a proxy: PUBLIC_URL', () => {
  let t: TestDatabase;
  let m: MessagingApp;
  const PUBLIC = 'https://aiq.example.com/base';
  before(async () => {
    t = await freshServerDatabase();
    m = await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9', { PUBLIC_URL: PUBLIC }));
  });
  after(async () => {
    await m.close();
    await t.close();
  });

  test('a signature over the public URL (with its query) is accepted; one over the local URL is refused', async () => {
    const path = `${WHATSAPP}?tenant=a`;
    assert.equal((await injectSigned(m.app, path, inboundParams('via proxy'), { signedUrl: `${PUBLIC}${path}` })).statusCode, 200);
    assert.equal((await injectSigned(m.app, path, inboundParams('direct'), { signedUrl: `http://localhost:80${path}` })).statusCode, 403);
    assert.equal((await injectSigned(m.app, WHATSAPP, inboundParams('query dropped'), { signedUrl: `${PUBLIC}${path}` })).statusCode, 403);
    assert.equal((await counts(t)).messages, 1);
  });
});

describe('TRUST_PROXY: the address signatures are checked against is PUBLIC_URL, never a forwarded one', () => {
  // With TRUST_PROXY, the URL a request names is X-Forwarded-Proto and -Host, which a client
  // sends itself and nginx passes on by default. Without PUBLIC_URL a post Twilio signed for
  // another address of the account (a staging aiq's) was taken with that address forwarded;
  // aiq serve and aiq start now refuse that setting (test/startup-wait.test.ts).
  let t: TestDatabase;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    m = await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9', { TRUST_PROXY: 'true' }), { listen: true });
  });
  after(async () => {
    await m.close();
    await t.close();
  });

  test('over HTTP: a post signed for another address, with that address forwarded, is refused; one signed for PUBLIC_URL is taken whatever is forwarded', async () => {
    const post = (signedUrl: string, params: Record<string, string>, forwarded: Record<string, string>) => {
      const form = signedForm(signedUrl, params);
      return fetch(`${m.url}${WHATSAPP}`, { method: 'POST', headers: { ...form.headers, ...forwarded }, body: form.payload });
    };
    const elsewhere = await post(`https://staging.example.org${WHATSAPP}`, inboundParams('signed for staging'), { 'x-forwarded-host': 'staging.example.org', 'x-forwarded-proto': 'https' });
    assert.equal(elsewhere.status, 403, await elsewhere.text());
    assert.deepEqual(await counts(t), NOTHING);
    const ours = await post(`${m.url}${WHATSAPP}`, inboundParams('signed for us'), { 'x-forwarded-host': 'staging.example.org', 'x-forwarded-proto': 'https' });
    assert.equal(ours.status, 200, await ours.text());
    assert.equal((await counts(t)).messages, 1);
  });
});

describe('checking switched off: TWILIO_SKIP_SIGNATURE', () => {
  test('accepts an unsigned webhook only when asked to, and is refused in production', async () => {
    const t = await freshServerDatabase();
    const m = await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9', { TWILIO_SKIP_SIGNATURE: 'true' }));
    try {
      const response = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(inboundParams('unsigned')).toString() });
      assert.equal(response.statusCode, 200);
      assert.equal((await counts(t)).messages, 1);
    } finally {
      await m.close();
      await t.close();
    }
    const { loadConfig } = await import('../src/config.ts');
    assert.throws(() => loadConfig({ NODE_ENV: 'production', TWILIO_SKIP_SIGNATURE: 'true' }), /TWILIO_SKIP_SIGNATURE: refused when NODE_ENV=production/);
  });

  test("a web page in the developer's browser cannot post a message through it", async () => {
    // Switched off on a developer's machine, the webhook still is no API for every site they
    // visit: a plain HTML form on any site posts form data cross-site without a preflight,
    // and a page that DNS-rebinds its name to 127.0.0.1 posts same-origin. Twilio sends
    // neither Origin nor Sec-Fetch-Site; a browser always does.
    const t = await freshServerDatabase();
    const m = await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9', { TWILIO_SKIP_SIGNATURE: 'true' }));
    try {
      const browsers = [
        { name: 'a form on another site', headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' } },
        { name: 'a DNS-rebinding page', headers: { host: 'rebind.evil.example:3000', origin: 'http://rebind.evil.example:3000', 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors' } },
        { name: 'a form on another port of localhost', headers: { origin: 'http://localhost:8080', 'sec-fetch-site': 'same-site' } },
      ];
      for (const [i, browser] of browsers.entries()) {
        for (const url of [WHATSAPP, `${STATUS}?messageId=01939b1e-7e2a-7000-8000-000000000001`]) {
          const payload = url === WHATSAPP ? new URLSearchParams(inboundParams(`from a browser ${i}`)).toString() : new URLSearchParams({ MessageSid: messageSid(), MessageStatus: 'failed' }).toString();
          const response = await m.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded', ...browser.headers }, payload });
          assert.equal(response.statusCode, 403, `${browser.name} ${url}: ${response.body}`);
        }
      }
      assert.deepEqual(await counts(t), NOTHING);
    } finally {
      await m.close();
      await t.close();
    }
  });

  // HOST=127.0.0.1 and no PUBLIC_URL passes the start's check, yet a proxy or tunnel on the
  // same machine (nginx, `ngrok http 3000`) relays the internet to that port: exactly where
  // signatures fail without PUBLIC_URL and the switch gets turned on.
  test('a request a proxy or tunnel relayed is refused: only this machine may post unsigned', async () => {
    const t = await freshServerDatabase();
    const m = await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9', { TWILIO_SKIP_SIGNATURE: 'true' }));
    try {
      const relays = [
        { name: 'nginx on this machine', headers: { host: 'aiq.example.com', 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https', 'x-real-ip': '203.0.113.9' } },
        { name: 'ngrok rewriting Host', headers: { host: 'localhost:3000', 'x-forwarded-for': '203.0.113.9', 'x-forwarded-host': 'abc.ngrok.app' } },
        { name: 'a proxy passing its own Host only', headers: { host: 'aiq.example.com' } },
      ];
      for (const [i, relay] of relays.entries()) {
        for (const url of [WHATSAPP, `${STATUS}?messageId=01939b1e-7e2a-7000-8000-000000000001`]) {
          const payload = url === WHATSAPP ? new URLSearchParams(inboundParams(`relayed ${i}`)).toString() : new URLSearchParams({ MessageSid: messageSid(), MessageStatus: 'failed' }).toString();
          const response = await m.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded', ...relay.headers }, payload });
          assert.equal(response.statusCode, 403, `${relay.name} ${url}: ${response.body}`);
          assert.match(response.body, /TWILIO_SKIP_SIGNATURE/);
        }
      }
      assert.deepEqual(await counts(t), NOTHING);
      // Posted on this machine directly (curl, aiq simulate), still accepted.
      const direct = await m.app.inject({ method: 'POST', url: WHATSAPP, headers: { 'content-type': 'application/x-www-form-urlencoded', host: '127.0.0.1:3000' }, payload: new URLSearchParams(inboundParams('direct')).toString() });
      assert.equal(direct.statusCode, 200, direct.body);
    } finally {
      await m.close();
      await t.close();
    }
  });
});

for (const backend of BACKENDS) {
  describe(`inbound webhook on ${backend.name}`, () => {
    test('stored once with its job; a redelivery stores nothing new', async () => {
      const t = await backend.fresh();
      // PGlite: the runtime must use this very database, so the app is built over it.
      const m = backend.name === 'postgres' ? await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9')) : await pgliteApp(t);
      try {
        const params = inboundParams('één keer');
        assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
        assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
        assert.deepEqual(await counts(t), { contacts: 1, conversations: 1, messages: 1, jobs: 1 });
      } finally {
        await m.close();
        await t.close();
      }
    });
  });
}

/** The real app over an in-memory PGlite test database (openRuntime would open DATA_DIR instead). */
async function pgliteApp(t: TestDatabase): Promise<MessagingApp> {
  const { loadConfig } = await import('../src/config.ts');
  const { buildApp } = await import('../src/http/app.ts');
  const { buildHandlers } = await import('../src/jobs/registry.ts');
  const { createLogger } = await import('../src/logger.ts');
  const { createTransport } = await import('../src/messaging/transport.ts');
  const { PromMetrics } = await import('../src/http/metrics.ts');
  const { aiProviderCreate } = await import('../src/ai/providers.ts');
  const { Profiles } = await import('../src/messaging/profiles.ts');
  const config = loadConfig(messagingEnv(undefined, 'http://127.0.0.1:9'));
  const logger = createLogger('silent');
  const metrics = new PromMetrics(t.db, 'local');
  const runtime = { config, db: t.db, logger, handlers: [], metrics, ai: aiProviderCreate(config), transport: createTransport(config, logger), profiles: new Profiles(config) } as Parameters<typeof buildApp>[0];
  runtime.handlers = buildHandlers(runtime);
  const app = await buildApp(runtime);
  return { runtime, app, url: '', startWorker: () => Promise.reject(new Error('not used')), close: () => app.close() };
}
