// Replies that fit WhatsApp: a 5,000-character LLM answer reaches the fake Twilio as
// numbered parts under the limit, in order, each once — also when a real worker process is
// SIGKILLed after Twilio accepted the first part; the LLM is asked with an output limit; an
// admin's text over the limit is refused (API 400, dashboard form error) and nothing stored.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { jobGet } from '../src/queue/index.ts';
import { TEST_ADMIN_TOKEN } from './helpers/admin-app.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, messagingEnv, signedForm, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
// Eight paragraphs of about 620 characters: 5,000 characters in all.
const LONG_ANSWER = Array.from({ length: 8 }, (_, p) => `Paragraph ${p + 1}. ${'Over de regeling voor thuiswerken en reiskosten geldt het volgende. '.repeat(9).trim()}`).join('\n\n');

describe('long replies go out as parts', () => {
  let t: TestDatabase;
  let llm: FakeOpenAi;
  let fake: FakeTwilio;
  let m: MessagingApp;
  let env: Record<string, string>;

  before(async () => {
    t = await freshServerDatabase();
    llm = await startFakeOpenAi({ reply: () => LONG_ANSWER });
    fake = await startFakeTwilio();
    env = messagingEnv(t.url, fake.url, {
      AI_PROVIDER: 'openai',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: llm.openaiBaseUrl,
      EMBEDDING_DIMENSIONS: '64',
      RAG_TOP_K: '0',
      AI_MAX_OUTPUT_TOKENS: '1500',
      ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    });
    m = await startMessagingApp(env, { listen: true });
    env.PUBLIC_URL = m.url;
  });
  after(async () => {
    await m.close();
    await llm.close();
    await fake.close();
    await t.close();
  });

  async function receive(body: string, from: string): Promise<string> {
    const params = inboundParams(body, from);
    const form = signedForm(`${m.url}${WHATSAPP}`, params);
    assert.equal((await fetch(`${m.url}${WHATSAPP}`, { method: 'POST', headers: form.headers, body: form.payload })).status, 200);
    return (await t.db.query<{ id: string }>('select id from messages where twilio_sid = $1', [params.MessageSid])).rows[0]!.id;
  }

  function assertParts(to: string): void {
    const sent = fake.messages.filter((s) => s.to === `whatsapp:${to}`);
    assert.equal(sent.length, 4, `4 parts, got ${sent.length}`);
    sent.forEach((s, i) => {
      assert.ok(s.body.length <= 1600, `part ${i + 1} is ${s.body.length} characters`);
      assert.ok(s.body.endsWith(` (${i + 1}/4)`), `part ${i + 1} in order: …${s.body.slice(-12)}`);
    });
    assert.equal(new Set(sent.map((s) => s.body)).size, 4, 'no part twice');
    const text = sent.map((s) => s.body.replace(/ \(\d\/4\)$/, '')).join('\n\n');
    assert.equal(text, LONG_ANSWER, 'nothing skipped');
  }

  test('a 5,000-character answer arrives as numbered parts under 1,600, in order, each once; the LLM call carries the output limit', async () => {
    fake.reset();
    const phone = '+31622220001';
    const inbound = await receive('Vertel me alles over thuiswerken.', phone);
    const worker = await m.startWorker();
    const job = (await t.db.query<{ id: string }>(`select id from ai_jobs where payload->>'messageId' = $1`, [inbound])).rows[0]!;
    await waitFor(async () => (await jobGet(t.db, job.id))!.status === 'done', 'the reply job');
    await worker.stop();
    assertParts(phone);
    assert.equal(((await jobGet(t.db, job.id))!.result as { parts?: number }).parts, 4);
    const rows = await t.db.query<{ part: number; parts: number; status: string }>(`select part, parts, status from messages where reply_to_message_id = $1 order by part`, [inbound]);
    assert.deepEqual(rows.rows.map((r) => [r.part, r.parts]), [[1, 4], [2, 4], [3, 4], [4, 4]]);
    // An OpenAI-compatible server (OPENAI_BASE_URL) is asked with max_tokens.
    assert.equal(llm.chatRequests().at(-1)!.body.max_tokens, 1500);
  });

  test('a worker killed after Twilio accepted part 1: no part is sent twice or skipped, and part 2 waits for part 1', async () => {
    fake.reset();
    fake.fault({ kind: 'accept-then-hang' });
    const phone = '+31622220002';
    const child = spawn(process.execPath, ['bin/aiq.js', 'worker'], { cwd: ROOT, env: { ...process.env, ...env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const exited = new Promise<string | number>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code ?? -1)));
    let inbound: string;
    try {
      await waitFor(() => output.includes('worker started'), `the worker process to start:\n${output}`, 60_000);
      inbound = await receive('En nu alles over reiskosten.', phone);
      await fake.waitForAccepted(1);
      child.kill('SIGKILL');
      assert.equal(await exited, 'SIGKILL');
    } finally {
      child.kill('SIGKILL');
    }
    const parts = async () => (await t.db.query<{ part: number; status: string }>(`select part, status from messages where reply_to_message_id = $1 order by part`, [inbound])).rows.map((r) => r.status);
    assert.deepEqual(await parts(), ['pending', 'unsent', 'unsent', 'unsent'], 'all parts written before the first send; the rest wait their turn');

    const job = (await t.db.query<{ id: string }>(`select id from ai_jobs where payload->>'messageId' = $1`, [inbound])).rows[0]!;
    await t.db.query(`update ai_jobs set locked_until = now() - interval '1 second' where id = $1`, [job.id]);
    const worker = await m.startWorker();
    await waitFor(async () => (await parts())[0] === 'unconfirmed', 'the retry to wait for part 1');
    assert.equal(fake.messages.filter((s) => s.to === `whatsapp:${phone}`).length, 1, 'part 2 does not go out while part 1 is unconfirmed');

    // Twilio reports part 1; the waiting job resumes and sends the rest, once each.
    assert.equal(await fake.deliverStatus(fake.messages[0]!.sid, 'delivered'), 200);
    await waitFor(async () => (await jobGet(t.db, job.id))!.status === 'done', 'the job to finish the parts');
    await worker.stop();
    assertParts(phone);
    assert.deepEqual(await parts(), ['delivered', 'queued', 'queued', 'queued']);
  });

  test('an admin reply over the limit is refused before anything is stored: 400 from the API, a form error in the dashboard', async () => {
    const conversation = (await t.db.query<{ id: string }>('select id from conversations limit 1')).rows[0]!.id;
    const count = async () => (await t.db.query<{ n: number }>(`select count(*)::int as n from messages where source = 'admin'`)).rows[0]!.n;
    const before = await count();
    const long = 'x'.repeat(1601);
    const api = await m.app.inject({ method: 'POST', url: `/api/conversations/${conversation}/messages`, headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }, payload: { body: long } });
    assert.equal(api.statusCode, 400);
    assert.match(api.json().error, /1601 characters; one WhatsApp message takes at most 1600/);

    const login = await m.app.inject({ method: 'POST', url: '/admin/login', payload: { token: TEST_ADMIN_TOKEN, next: '/admin' } });
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const page = await m.app.inject({ url: `/admin/conversations/${conversation}`, headers: { cookie } });
    assert.match(page.body, /<textarea name="body" dir="auto" required maxlength="1600">/);
    const csrf = /name="csrf-token" content="([^"]+)"/.exec(page.body)![1]!;
    const form = await m.app.inject({ method: 'POST', url: `/admin/conversations/${conversation}/reply`, headers: { cookie, origin: 'http://localhost' }, payload: { body: long, _csrf: csrf } });
    // The page again with the problem, and the reply box still holding the text: a redirect
    // emptied it (found by a new-user probe).
    assert.equal(form.statusCode, 400);
    assert.match(form.body, /class="problem"[^>]*>the reply is 1601 characters; one WhatsApp message takes at most 1600/);
    assert.match(form.body, new RegExp(`<textarea name="body" dir="auto" required maxlength="1600">${long}</textarea>`));
    assert.equal(await count(), before, 'nothing stored');
    // Refused for the contact's sake (opted out): the same, the text kept.
    await t.db.query(`update contacts set opted_out_at = now(), opted_out_by = 'admin' where id = (select contact_id from conversations where id = $1)`, [conversation]);
    try {
      const optedOut = await m.app.inject({ method: 'POST', url: `/admin/conversations/${conversation}/reply`, headers: { cookie, origin: 'http://localhost' }, payload: { body: 'Kun je me terugbellen?', _csrf: csrf } });
      assert.equal(optedOut.statusCode, 400, optedOut.body);
      assert.match(optedOut.body, /class="problem"[^>]*>[^<]*opted out/);
      assert.match(optedOut.body, /<textarea name="body" dir="auto" required maxlength="1600">Kun je me terugbellen\?<\/textarea>/);
    } finally {
      await t.db.query(`update contacts set opted_out_at = null, opted_out_by = null where id = (select contact_id from conversations where id = $1)`, [conversation]);
    }
    assert.equal(await count(), before, 'nothing stored');
  });
});
