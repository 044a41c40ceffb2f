// The default deployment end to end: embedded PGlite (pgvector) and the offline `local`
// provider, no keys and no Twilio. Knowledge is embedded by embed_record jobs, and the
// reply is the labelled extractive answer quoting the right chunk and the sender's record.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { OFFLINE_LABEL } from '../src/ai/local-provider.ts';
import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { embedRecordEnqueue } from '../src/jobs/embed-record.ts';
import { documentSave } from '../src/knowledge/documents.ts';
import { personUpsertMany } from '../src/knowledge/people.ts';
import { vectorSettingsGet, vectorStaleCount } from '../src/knowledge/vectors.ts';
import { createWorker, openRuntime } from '../src/main.ts';
import type { Worker } from '../src/queue/index.ts';
import type { Runtime } from '../src/runtime.ts';
import { seedEmbeddedDataDir } from './helpers/db.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'aiq-offline-'));
let runtime: Runtime;
let app: FastifyInstance;
let worker: Worker;

before(async () => {
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', DATA_DIR: dataDir, TWILIO_SKIP_SIGNATURE: 'true', WORKER_POLL_INTERVAL_MS: '100' });
  await seedEmbeddedDataDir(dataDir);
  runtime = await openRuntime(config, 'start');
  app = await buildApp(runtime);
  worker = createWorker(runtime);
  await worker.start();
});
after(async () => {
  await worker?.stop();
  await app?.close();
  await runtime?.db.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function until<T>(what: string, check: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

test('with no keys at all, a message gets an offline answer from the knowledge base', async () => {
  assert.equal(runtime.ai.name, 'local');
  assert.equal((await vectorSettingsGet(runtime.db))!.storage, 'pgvector');
  await runtime.db.transaction(async (tx) => {
    await personUpsertMany(tx, [{ name: 'Anna de Vries', phone: '+31612345678', department: 'Finance', role: 'Controller' }]);
    for (const doc of [
      { title: 'Leave policy', body: 'Every employee has 25 days of paid holiday per year.\n\nRequest holiday in the HR portal two weeks ahead.' },
      { title: 'IT support', body: 'A forgotten password is reset at the service desk on the second floor.' },
    ]) {
      const saved = await documentSave(tx, doc);
      await embedRecordEnqueue(tx, [saved.id]);
    }
  });
  worker.wake();
  await until('the embeddings', async () => (await vectorStaleCount(runtime.db)) === 0);

  const response = await app.inject({
    method: 'POST',
    url: '/webhooks/twilio/whatsapp',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      MessageSid: `SM${'1'.repeat(32)}`,
      AccountSid: `AC${'0'.repeat(32)}`,
      From: 'whatsapp:+31612345678',
      To: 'whatsapp:+14155238886',
      Body: 'How many holiday days do I get per year?',
      NumMedia: '0',
    }).toString(),
  });
  assert.equal(response.statusCode, 200, response.body);

  const reply = await until('the reply', async () => {
    const rows = await runtime.db.query<{ body: string; status: string }>(`select body, status from messages where source = 'ai'`);
    return rows.rows[0];
  });
  assert.equal(reply.status, 'logged', 'no Twilio credentials: the reply is stored and logged');
  const lines = reply.body.split('\n');
  assert.equal(lines[0], OFFLINE_LABEL);
  assert.equal(lines[1], 'From "Leave policy": Every employee has 25 days of paid holiday per year.');
  assert.ok(!reply.body.includes('password'), reply.body);
  // Offline answers follow the prompt's minimisation: no email or phone by default.
  assert.match(reply.body, /Your record: Name: Anna de Vries; Department: Finance; Role: Controller/);
  assert.ok(!/\+31612345678|@/.test(reply.body), reply.body);
});

test('a question the knowledge base cannot answer takes the "I don\'t know" path, recorded with the reply and shown in the dashboard', async () => {
  const response = await app.inject({
    method: 'POST',
    url: '/webhooks/twilio/whatsapp',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      MessageSid: `SM${'2'.repeat(32)}`,
      AccountSid: `AC${'0'.repeat(32)}`,
      From: 'whatsapp:+31699999999',
      To: 'whatsapp:+14155238886',
      Body: 'Hoeveel inwoners heeft de hoofdstad van Peru?',
      NumMedia: '0',
    }).toString(),
  });
  assert.equal(response.statusCode, 200, response.body);
  const reply = await until('the reply', async () => {
    const rows = await runtime.db.query<{ body: string; citations: { noAnswer: boolean; sources: unknown[]; relevance: number; threshold: number }; conversation_id: string }>(
      `select m.body, m.citations, m.conversation_id from messages m where m.source = 'ai' and m.reply_to_message_id = (select id from messages where twilio_sid = $1)`,
      [`SM${'2'.repeat(32)}`],
    );
    return rows.rows[0];
  });
  assert.match(reply.body, /I found nothing in the knowledge base that matches your question; a colleague will follow up/);
  assert.equal(reply.citations.noAnswer, true);
  assert.deepEqual(reply.citations.sources, []);
  assert.ok(reply.citations.relevance < reply.citations.threshold);
  const page = await app.inject({ method: 'GET', url: `/admin/conversations/${reply.conversation_id}` });
  assert.match(page.body, /data-no-answer="true">no source relevant enough/);
  // Nothing found at all, with the threshold off (an empty knowledge base): no "best 0.00 <
  // threshold 0.00", which is false (found by a WhatsApp probe).
  await runtime.db.query(`update messages set citations = citations || '{"relevance": 0, "threshold": 0}' where source = 'ai' and conversation_id = $1`, [reply.conversation_id]);
  const empty = await app.inject({ method: 'GET', url: `/admin/conversations/${reply.conversation_id}` });
  assert.match(empty.body, /data-no-answer="true">nothing in the knowledge base matched the question: told to say it does not know/);
  assert.doesNotMatch(empty.body, /best 0\.00 &lt; threshold 0\.00/);
});

test('the offline answer quotes whole sentences of text wrapped over lines, and list items one by one', async () => {
  const { localProviderCreate } = await import('../src/ai/local-provider.ts');
  const provider = localProviderCreate({ dimensions: 64 });
  const knowledge = (content: string) => [{ id: 'c1', documentId: 'd1', title: 'Handboek', headingPath: ['Vakantiedagen'], content, score: 1, relevance: 1 }];
  const ask = async (content: string) =>
    (await provider.chat({ messages: [], grounding: { questions: ['Tot wanneer kan ik mijn vakantiedagen opnemen?'], person: null, knowledge: knowledge(content) } })).text;
  // Wrapped at a fixed width, as Markdown often is: the sentence runs on after the line break.
  const wrapped = await ask('Je hebt 25 vakantiedagen per jaar. Niet opgenomen dagen\nvervallen op 1 juli van het volgende jaar.');
  assert.match(wrapped, /Niet opgenomen dagen vervallen op 1 juli van het volgende jaar\./);
  // A list keeps its items apart.
  const list = await ask('Vakantiedagen opnemen:\n- vraag ze aan in het HR-portaal\n- uiterlijk 1 juli van het volgende jaar');
  assert.match(list, /- uiterlijk 1 juli van het volgende jaar/);
  assert.doesNotMatch(list, /portaal - uiterlijk/);
});

test('the offline answer quotes no sentence that shares only little words ("the", "from", "het") with the question', async () => {
  const { localProviderCreate } = await import('../src/ai/local-provider.ts');
  const provider = localProviderCreate({ dimensions: 64 });
  const chunk = (title: string, content: string) => ({ id: title, documentId: title, title, headingPath: [], content, score: 1, relevance: 0.5 });
  const ask = async (question: string, knowledge: ReturnType<typeof chunk>[]) =>
    (await provider.chat({ messages: [], grounding: { questions: [question], person: null, knowledge } })).text;
  const english = await ask('What is the policy on working from home?', [
    chunk('Handbook', 'You may work from home two days a week. Ask your manager first.'),
    chunk('Canteen', 'The canteen is open from 12 to 14. Lunch is free on Fridays.'),
  ]);
  assert.match(english, /From "Handbook": You may work from home two days a week\./);
  assert.doesNotMatch(english, /canteen|Lunch/);
  const dutch = await ask('Hoeveel vakantiedagen heb ik in het jaar?', [
    chunk('Verlof', 'Je hebt recht op 25 vakantiedagen per jaar.'),
    chunk('Kantine', 'De kantine is open van 12 tot 14 uur. Het parkeren is gratis.'),
  ]);
  assert.match(dutch, /From "Verlof": Je hebt recht op 25 vakantiedagen per jaar\./);
  assert.doesNotMatch(dutch, /parkeren/);
});
