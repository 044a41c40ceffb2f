// The AI pipeline end to end on a real PostgreSQL: a signed webhook → autoreply job →
// retrieval (sender's record by phone, top-k chunks) → chat at a fake OpenAI server → reply
// at a fake Twilio API. Faults injected at the fake LLM (429, 500, hang, 400) become the
// right job states, and recovery still sends exactly one reply. Bursts are answered whole.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { embedRecord } from '../src/jobs/embed-record.ts';
import { importPeopleEnqueue } from '../src/jobs/import-people.ts';
import { suggestEnqueue, suggestionDiscard, suggestionGet } from '../src/jobs/suggest.ts';
import { importGet } from '../src/knowledge/csv-import.ts';
import { documentSave } from '../src/knowledge/documents.ts';
import { personUpsertMany } from '../src/knowledge/people.ts';
import { chunkLocation } from '../src/knowledge/chunking.ts';
import { messageAnsweredBy, type Citations } from '../src/messaging/conversations.ts';
import { createWorker, openRuntime } from '../src/main.ts';
import { signatureOf, WHATSAPP_WEBHOOK_PATH } from '../src/messaging/twilio.ts';
import { jobGet, type Job, type Worker } from '../src/queue/index.ts';
import type { Runtime } from '../src/runtime.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';

const PUBLIC_URL = 'https://aiq.example.test';
const ANNA = '+31612345678';

let t: TestDatabase;
let llm: FakeOpenAi;
let twilioApi: FakeTwilio;
let runtime: Runtime;
let app: FastifyInstance;
let worker: Worker;
let sid = 0;

before(async () => {
  t = await freshServerDatabase();
  llm = await startFakeOpenAi({ reply: (_body, n) => `Reply number ${n}.` });
  twilioApi = await startFakeTwilio();
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: t.url,
    PUBLIC_URL,
    AI_PROVIDER: 'openai',
    OPENAI_API_KEY: 'sk-test',
    OPENAI_BASE_URL: llm.openaiBaseUrl,
    // Short enough for the hang below, long enough that a stalled test process (the fake runs
    // in it) does not time out a call whose answer has come.
    AI_REQUEST_TIMEOUT_MS: '2000',
    EMBEDDING_DIMENSIONS: '128',
    RAG_TOP_K: '2',
    TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID,
    TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN,
    TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886',
    TWILIO_API_BASE_URL: twilioApi.url,
    WORKER_POLL_INTERVAL_MS: '100',
  });
  runtime = await openRuntime(config, 'cli');
  app = await buildApp(runtime);

  // The knowledge base: two people and three documents, embedded through the fake server.
  await personUpsertMany(runtime.db, [
    { name: 'Anna de Vries', phone: ANNA, email: 'anna@example.com', department: 'Finance', role: 'Controller', attributes: { Office: 'Utrecht', 'Mobile (private)': '06-9999 8888', 'Email (private)': 'anna@home.example', Home: 'Tel. 030 777 6655 (evenings)', Spreadsheet: '31677776655', Started: '2019-03-01' } },
    { name: 'Bram Jansen', phone: '+31687654321', department: 'IT', role: 'Developer' },
  ]);
  for (const doc of [
    { title: 'Leave policy', body: 'Every employee has 25 days of paid holiday leave per year. Request holiday leave in the HR portal.' },
    { title: 'Expenses', body: 'Travel expenses and taxi receipts are reimbursed within 30 days through the finance app.' },
    { title: 'IT support', body: 'A forgotten password is reset at the service desk on the second floor.' },
  ]) {
    const saved = await runtime.db.transaction((tx) => documentSave(tx, doc));
    await embedRecord(runtime.db, runtime.ai, { table: 'documents', id: saved.id });
  }
  worker = createWorker(runtime);
  await worker.start();
});

after(async () => {
  await worker?.stop();
  await app?.close();
  await runtime?.db.close();
  await llm?.close();
  await twilioApi?.close();
  await t?.close();
});

beforeEach(() => llm.reset());

/** Posts an inbound WhatsApp message exactly as Twilio would (signed). */
async function inbound(from: string, body: string): Promise<string> {
  sid += 1;
  const params = {
    MessageSid: `SM${String(sid).padStart(32, '0')}`,
    AccountSid: FAKE_ACCOUNT_SID,
    From: `whatsapp:${from}`,
    To: 'whatsapp:+14155238886',
    Body: body,
    NumMedia: '0',
    ProfileName: 'Tester',
  };
  const response = await app.inject({
    method: 'POST',
    url: WHATSAPP_WEBHOOK_PATH,
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signatureOf(FAKE_AUTH_TOKEN, `${PUBLIC_URL}${WHATSAPP_WEBHOOK_PATH}`, params) },
    payload: new URLSearchParams(params).toString(),
  });
  assert.equal(response.statusCode, 200, response.body);
  return params.MessageSid;
}

async function autoreplyJobFor(messageSid: string): Promise<Job> {
  const row = await runtime.db.query<{ id: string }>(
    `select j.id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1 and j.type = 'autoreply'`,
    [messageSid],
  );
  return (await jobGet(runtime.db, row.rows[0]!.id))!;
}

/** Polls until `check` holds (the worker works asynchronously); never waits out a backoff. */
async function until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function jobSettled(messageSid: string, attempt: (job: Job) => boolean): Promise<Job> {
  return until('the job to settle', async () => {
    const job = await autoreplyJobFor(messageSid);
    return job.status !== 'processing' && attempt(job) ? job : undefined;
  });
}

/** Makes a job waiting out a delay due now, as the clock would, and wakes the worker. */
async function makeDue(jobId: string): Promise<void> {
  await runtime.db.query(`update ai_jobs set next_run_at = now() where id = $1 and status = 'pending'`, [jobId]);
  worker.wake();
}

async function sentTo(phone: string): Promise<string[]> {
  return twilioApi.messages.filter((m) => m.to === `whatsapp:${phone}`).map((m) => m.body);
}

test('an inbound message gets exactly one reply, prompted with the sender record and the right chunk', async () => {
  const messageSid = await inbound(ANNA, 'How many days of holiday leave do I have per year?');
  const job = await jobSettled(messageSid, (j) => j.status === 'done');
  assert.deepEqual(await sentTo(ANNA), ['Reply number 1.']);

  const [chat] = llm.chatRequests();
  // Instructions in the system message; the record and the knowledge as delimited data after it.
  assert.equal(chat!.body.messages[0].role, 'system');
  assert.equal(chat!.body.messages[1].role, 'user');
  const data: string = chat!.body.messages[1].content;
  // Data minimisation: by default (PROMPT_PERSON_FIELDS) the phone and email stay out of the prompt.
  // Emails and numbers in further columns stay out too (found by a personal-data probe): a
  // column of nothing else goes, the rest of one keeps its words; a date stays.
  assert.match(data, /<employee_record>\nName: Anna de Vries\nDepartment: Finance\nRole: Controller\nHome: Tel\. \[phone number\] \(evenings\)\nOffice: Utrecht\nStarted: 2019-03-01\n<\/employee_record>/);
  for (const personal of ['anna@example.com', '+31612345678', 'anna@home.example', '9999 8888', '777 6655', '31677776655']) assert.ok(!JSON.stringify(chat!.body.messages).includes(personal), `${personal} is not in the prompt`);
  assert.match(data, /<document index="1" title="Leave policy">\nEvery employee has 25 days of paid holiday leave per year/);
  assert.doesNotMatch(data, /forgotten password/, 'top-k kept the unrelated chunk out');
  assert.deepEqual(chat!.body.messages.at(-1), { role: 'user', content: 'How many days of holiday leave do I have per year?' });

  const result = job.result as { provider: string; usage: { totalTokens: number; promptTokens: number } };
  assert.equal(result.provider, 'openai');
  assert.ok(result.usage.totalTokens > 0 && result.usage.promptTokens > 0, 'token usage is recorded with the job');
  const replies = await runtime.db.query(`select body from messages where source = 'ai' and reply_to_message_id = (select id from messages where twilio_sid = $1)`, [messageSid]);
  assert.deepEqual(replies.rows, [{ body: 'Reply number 1.' }]);
  const usage = await runtime.db.query<{ operation: string; total: number }>(
    `select operation, sum(total_tokens)::int as total from ai_usage
     where purpose = 'autoreply' and subject_id = (select id from messages where twilio_sid = $1) group by operation order by operation`,
    [messageSid],
  );
  assert.deepEqual(usage.rows.map((r) => r.operation), ['chat', 'embed']);
  assert.equal(usage.rows.reduce((sum, r) => sum + r.total, 0), result.usage.totalTokens, 'ai_usage and the job result agree');
});

test('a reply records as its citations exactly the chunks its prompt carried, and the dashboard links them', async () => {
  const messageSid = await inbound(ANNA, 'Where do I hand in taxi receipts for travel expenses?');
  await jobSettled(messageSid, (j) => j.status === 'done');
  const data: string = llm.chatRequests().at(-1)!.body.messages[1].content;
  const inPrompt = [...data.matchAll(/<document index="\d+" title="([^"]+)">\n([^<]*)\n<\/document>/g)].map((m) => ({ title: m[1], content: m[2] }));
  assert.ok(inPrompt.length > 0);
  const row = await runtime.db.query<{ citations: Citations; conversation_id: string }>(
    `select citations, conversation_id from messages where source = 'ai' and reply_to_message_id = (select id from messages where twilio_sid = $1)`,
    [messageSid],
  );
  const { citations } = row.rows[0]!;
  assert.equal(citations.noAnswer, false);
  assert.deepEqual(citations.sources.map((s) => chunkLocation(s.title, s.headingPath)), inPrompt.map((p) => p.title));
  const chunks = await runtime.db.query<{ id: string; content: string }>('select id, content from document_chunks where id = any($1::uuid[])', [citations.sources.map((s) => s.chunkId)]);
  assert.deepEqual(
    citations.sources.map((s) => chunks.rows.find((c) => c.id === s.chunkId)?.content),
    inPrompt.map((p) => p.content),
    'the cited chunks are the ones whose text the model read',
  );
  const page = await app.inject({ method: 'GET', url: `/admin/conversations/${row.rows[0]!.conversation_id}` });
  for (const s of citations.sources) assert.ok(page.body.includes(`href="/admin/documents/${s.documentId}#chunk-${s.chunkId}"`), 'each source links to its place in the document');
  const docPage = await app.inject({ method: 'GET', url: `/admin/documents/${citations.sources[0]!.documentId}` });
  assert.equal(docPage.statusCode, 200);
  assert.ok(docPage.body.includes(`id="chunk-${citations.sources[0]!.chunkId}"`));
});

test('three 429s, a 500 and a hang at the LLM: rescheduled as they should be, then exactly one reply', async () => {
  const phone = '+31600000429';
  llm.failNext({ kind: 'status', status: 429, headers: { 'retry-after-ms': '60000' } }, { endpoint: 'chat', times: 3 });
  const messageSid = await inbound(phone, 'Where do I submit taxi receipts?');

  // Three 429s (Azure throttles in bursts): each waits the server's 60 s and gives the
  // attempt back, so they cannot use up the job's three attempts.
  let job = await jobSettled(messageSid, (j) => j.errors.length === 1);
  for (let throttled = 1; ; throttled++) {
    assert.equal(job.status, 'pending');
    assert.equal(job.attempts, 0, 'a throttled attempt is refunded');
    const wait = job.nextRunAt.getTime() - Date.now();
    assert.ok(wait > 55_000 && wait <= 60_500, `next_run_at honours retry-after-ms (in ${wait} ms)`);
    assert.match(job.lastError!, /HTTP 429/);
    if (throttled === 3) break;
    await makeDue(job.id);
    job = await jobSettled(messageSid, (j) => j.errors.length === throttled + 1);
  }

  // 500: an ordinary failed attempt with backoff (2^1 × 5 s).
  llm.failNext({ kind: 'status', status: 500 }, { endpoint: 'chat' });
  await makeDue(job.id);
  job = await jobSettled(messageSid, (j) => j.errors.length === 4);
  assert.equal(job.status, 'pending');
  assert.equal(job.attempts, 1);
  const backoff = job.nextRunAt.getTime() - Date.now();
  assert.ok(backoff > 8_000 && backoff <= 10_500, `backoff of about 10 s (${backoff} ms)`);
  assert.match(job.lastError!, /HTTP 500/);

  // A hang: the request time-out (2 s) fires, and it is retried like a 500.
  llm.failNext({ kind: 'hang' }, { endpoint: 'chat' });
  await makeDue(job.id);
  job = await jobSettled(messageSid, (j) => j.errors.length === 5);
  assert.equal(job.status, 'pending');
  assert.equal(job.attempts, 2);
  assert.match(job.lastError!, /timed out/i);
  assert.deepEqual(await sentTo(phone), [], 'nothing was sent while the LLM failed');

  // Recovery: the third attempt succeeds, and exactly one reply goes out.
  await makeDue(job.id);
  job = await jobSettled(messageSid, (j) => j.status === 'done');
  assert.equal(job.attempts, 3);
  assert.equal((await sentTo(phone)).length, 1);
  assert.equal(llm.chatRequests().filter((r) => r.outcome === 200).length, 1);
  const replies = await runtime.db.query(`select count(*)::int as n from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id where k.whatsapp_number = $1 and m.source = 'ai'`, [phone]);
  assert.equal(replies.rows[0]!.n, 1);
  // The question was embedded on each of the six attempts: all of it is in ai_usage.
  const calls = await runtime.db.query<{ operation: string; n: number }>(
    `select operation, count(*)::int as n from ai_usage where subject_id = (select id from messages where twilio_sid = $1) group by operation order by operation`,
    [messageSid],
  );
  assert.deepEqual(calls.rows, [{ operation: 'chat', n: 1 }, { operation: 'embed', n: 6 }]);
});

test('past the throttle window, a 429 spends an attempt like any failure', async () => {
  const phone = '+31600000901';
  llm.failNext({ kind: 'status', status: 500 }, { endpoint: 'chat' });
  const messageSid = await inbound(phone, 'Still there?');
  let job = await jobSettled(messageSid, (j) => j.errors.length === 1);
  assert.equal(job.attempts, 1);
  // The job is older than AI_THROTTLE_WINDOW_SECONDS (900 s by default).
  await runtime.db.query(`update ai_jobs set created_at = now() - interval '1 hour' where id = $1`, [job.id]);
  llm.failNext({ kind: 'status', status: 429, headers: { 'retry-after': '30' } }, { endpoint: 'chat' });
  await makeDue(job.id);
  job = await jobSettled(messageSid, (j) => j.errors.length === 2);
  assert.equal(job.status, 'pending');
  assert.equal(job.attempts, 2, 'not refunded any more');
  const wait = job.nextRunAt.getTime() - Date.now();
  assert.ok(wait > 25_000 && wait <= 30_500, `still waits the server's retry-after (${wait} ms)`);
});

test('a 400 from the LLM fails the job at once, with the reason, and sends nothing', async () => {
  const phone = '+31600000400';
  llm.failNext({ kind: 'status', status: 400, message: 'context length exceeded' }, { endpoint: 'chat' });
  const messageSid = await inbound(phone, 'Hello?');
  const job = await jobSettled(messageSid, (j) => j.status === 'failed');
  assert.equal(job.attempts, 1);
  assert.match(job.lastError!, /HTTP 400.*context length exceeded/);
  assert.deepEqual(await sentTo(phone), []);
});

test('a burst of three messages: never two replies to one message, and the last prompt has all three', async () => {
  const phone = '+31600000333';
  const texts = ['Hi, quick questions.', 'How many holiday days do I get?', 'And who resets my password?'];
  const sids: string[] = [];
  for (const text of texts) sids.push(await inbound(phone, text));
  for (const s of sids) await jobSettled(s, (j) => j.status === 'done');

  const replies = await runtime.db.query<{ reply_to_message_id: string }>(
    `select m.reply_to_message_id from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id
     where k.whatsapp_number = $1 and m.source = 'ai'`,
    [phone],
  );
  assert.ok(replies.rowCount >= 1 && replies.rowCount <= 3);
  assert.equal(new Set(replies.rows.map((r) => r.reply_to_message_id)).size, replies.rowCount, 'no message answered twice');
  assert.equal((await sentTo(phone)).length, replies.rowCount);
  const prompts = llm.chatRequests().filter((r) => r.outcome === 200);
  assert.equal(prompts.length, replies.rowCount, 'one LLM call per reply: the other jobs were no-ops');
  const last = JSON.stringify(prompts.at(-1)!.body.messages);
  for (const text of texts) assert.ok(last.includes(text), `the last prompt contains "${text}"`);
});

test('an uploaded CSV is imported by the worker without embedding anyone, and their record reaches the prompt', async () => {
  const csv = 'Naam;Mobiel;E-mail;Afdeling\nCees Visser;+31 6 5555 0001;cees@example.com;Logistics\nKapot;12;;\n';
  const { importId, jobId } = await runtime.db.transaction((tx) => importPeopleEnqueue(tx, { filename: 'upload.csv', content: Buffer.from(csv) }));
  worker.wake();
  await until('the import job', async () => (await jobGet(runtime.db, jobId))!.status === 'done');
  const record = await importGet(runtime.db, importId);
  assert.equal(record!.status, 'done');
  assert.equal(record!.inserted, 1);
  assert.deepEqual(record!.rowErrors.map((e) => e.line), [3]);
  // People are found by phone, never by meaning: an import queues no embedding.
  const embedJobs = await runtime.db.query(`select 1 from ai_jobs where type = 'embed_record' and payload->>'table' = 'people'`);
  assert.equal(embedJobs.rowCount, 0);
  const messageSid = await inbound('+31655550001', 'Hello, which department am I in?');
  await jobSettled(messageSid, (j) => j.status === 'done');
  assert.match(llm.chatRequests().at(-1)!.body.messages[1].content, /Name: Cees Visser\nDepartment: Logistics/);
});

describe('suggest', () => {
  test('stores one suggestion per inbound message and sends nothing', async () => {
    const phone = '+31600000777';
    const messageSid = await inbound(phone, 'Can a human help me with my expenses?');
    await jobSettled(messageSid, (j) => j.status === 'done');
    assert.equal((await sentTo(phone)).length, 1, 'the autoreply answered');

    const message = await runtime.db.query<{ id: string; conversation_id: string }>('select id, conversation_id from messages where twilio_sid = $1', [messageSid]);
    const { id: messageId, conversation_id: conversationId } = message.rows[0]!;
    // A human takes over; the admin asks for a suggestion (twice, as a double click would).
    await runtime.db.query('update conversations set ai_paused = true where id = $1', [conversationId]);
    const first = await suggestEnqueue(runtime.db, { conversationId, messageId });
    const second = await suggestEnqueue(runtime.db, { conversationId, messageId });
    worker.wake();
    const done = await until('both suggest jobs', async () => {
      const jobs = await Promise.all([jobGet(runtime.db, first), jobGet(runtime.db, second)]);
      return jobs.every((j) => j!.status === 'done') ? jobs : undefined;
    });
    const suggestionId = (done[0]!.result as { suggestionId: string }).suggestionId;
    assert.deepEqual(done[1]!.result, { skipped: 'a suggestion for this message exists', suggestionId });
    const suggestion = await suggestionGet(runtime.db, suggestionId);
    assert.equal(suggestion!.status, 'pending');
    assert.match(suggestion!.body, /^Reply number \d+\.$/);
    assert.ok(suggestion!.usage.totalTokens > 0);
    const drafted = llm.chatRequests().at(-1)!.body.messages;
    assert.match(JSON.stringify(drafted), /Travel expenses and taxi receipts/);
    // Answered already, the draft answers the message again: the model's last turn is the
    // question, not the reply that answered it.
    assert.deepEqual(drafted.at(-1), { role: 'user', content: 'Can a human help me with my expenses?' });
    assert.equal((await sentTo(phone)).length, 1, 'a suggestion is never sent by the job');
    assert.equal(await suggestionDiscard(runtime.db, suggestionId), true);
    assert.equal(await suggestionDiscard(runtime.db, suggestionId), false, 'a decision is final');

    // Discarded, the admin asks again: a new draft, not "a suggestion exists".
    const again = await suggestEnqueue(runtime.db, { conversationId, messageId });
    worker.wake();
    const redone = await until('the new suggest job', async () => {
      const job = await jobGet(runtime.db, again);
      return job?.status === 'done' ? job : undefined;
    });
    const redraftId = (redone.result as { suggestionId: string }).suggestionId;
    assert.ok(redraftId && redraftId !== suggestionId, JSON.stringify(redone.result));
    const redraft = (await suggestionGet(runtime.db, redraftId))!;
    assert.equal(redraft.status, 'pending');

    // A new question comes in before the draft is sent; sent as drafted, the draft answers
    // only what it covered: the new question stays open for its own reply.
    const later = await inbound(phone, 'And how do I book a taxi?');
    const seqs = await runtime.db.query<{ seq: string }>(`select seq from messages where twilio_sid = $1`, [later]);
    const laterSeq = Number(seqs.rows[0]!.seq);
    assert.ok(redraft.contextUntilSeq !== null && redraft.contextUntilSeq < laterSeq);
    const { suggestionSend } = await import('../src/http/admin/conversation-actions.ts');
    const { message: sent } = await suggestionSend(runtime, redraftId);
    assert.equal(await messageAnsweredBy(runtime.db, conversationId, redraft.contextUntilSeq!), sent.id);
    assert.equal(await messageAnsweredBy(runtime.db, conversationId, laterSeq), null, 'the later question is not answered by the draft');
  });
});
