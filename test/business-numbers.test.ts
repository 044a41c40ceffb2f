// Several business numbers over real HTTP, a real worker, the fake OpenAI and the fake
// Twilio: one contact writing to the HR desk and to the IT desk has two conversations, each
// answered from the number written to, with that number's system prompt and only the
// documents its profile may use; the default number keeps the plain settings. The
// dashboard filters conversations by number; a wrong profiles file stops the start.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { documentAdd, embedRecord } from '../src/jobs/embed-record.ts';
import { DEFAULT_CHUNK_SETTINGS } from '../src/knowledge/chunking.ts';
import { Profiles } from '../src/messaging/profiles.ts';
import { jobGet } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { FROM_NUMBER, inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
const HR = '+3197010000001';
const IT = '+3197010000002';
const ANNA = '+31612345678';
const QUESTION = 'Hoe werkt de VPN thuis, en hoeveel vakantiedagen heb ik?';

const dir = mkdtempSync(join(tmpdir(), 'aiq-profiles-'));
let t: TestDatabase;
let llm: FakeOpenAi;
let twilioApi: FakeTwilio;
let m: MessagingApp;

before(async () => {
  writeFileSync(join(dir, 'hr.txt'), 'You are the HR desk of Meridiaan. Answer leave and pay questions only.');
  writeFileSync(join(dir, 'it.txt'), 'You are the IT desk of Meridiaan. Answer IT questions only.');
  writeFileSync(
    join(dir, 'profiles.json'),
    JSON.stringify({
      profiles: [
        // Capitals in the profile, lower case on the document: tags match in lower case.
        { number: HR, name: 'HR desk', systemPromptFile: 'hr.txt', documentTags: ['HR'] },
        { number: IT, name: 'IT desk', systemPromptFile: 'it.txt', documentTags: ['it'] },
      ],
    }),
  );
  t = await freshServerDatabase();
  llm = await startFakeOpenAi({ reply: (body) => `Antwoord: ${String(body.messages[0].content).slice(0, 20)}` });
  twilioApi = await startFakeTwilio();
  m = await startMessagingApp(
    messagingEnv(t.url, twilioApi.url, {
      AI_PROVIDER: 'openai',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: llm.openaiBaseUrl,
      EMBEDDING_DIMENSIONS: '128',
      PROFILES_FILE: join(dir, 'profiles.json'),
    }),
  );
  for (const doc of [
    { title: 'HR handboek', body: 'Vakantiedagen: bij een fulltime dienstverband heb je 25 vakantiedagen per jaar.', tags: ['hr'] },
    { title: 'IT handboek', body: 'VPN thuis: gebruik GlobalProtect en log in met MFA.', tags: ['IT'] },
  ]) {
    const saved = await documentAdd(m.runtime.db, doc, DEFAULT_CHUNK_SETTINGS);
    await embedRecord(m.runtime.db, m.runtime.ai, { table: 'documents', id: saved.id });
  }
  await m.startWorker();
});
after(async () => {
  await m?.close();
  await llm?.close();
  await twilioApi?.close();
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Sends `body` from `from` to the business number `to`; waits for its reply; returns the prompt the model got. */
async function ask(to: string, body = QUESTION, from = ANNA): Promise<{ system: string; data: string; conversationId: string }> {
  const params = inboundParams(body, from, { To: `whatsapp:${to}` });
  const before = llm.chatRequests().length;
  assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
  const row = await t.db.query<{ id: string; conversation_id: string }>(
    `select j.id, m.conversation_id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
    [params.MessageSid],
  );
  await waitFor(async () => (await jobGet(t.db, row.rows[0]!.id))?.status === 'done', `the reply to ${to}`);
  const chat = llm.chatRequests()[before]!;
  return { system: chat.body.messages[0].content, data: chat.body.messages[1].content, conversationId: row.rows[0]!.conversation_id };
}

test('each number answers from itself, with its own prompt and only its own documents', async () => {
  const hr = await ask(HR);
  assert.match(hr.system, /^You are the HR desk of Meridiaan/);
  assert.match(hr.data, /title="HR handboek"/, 'the profile\'s "HR" finds the document tagged "hr"');
  assert.doesNotMatch(hr.data, /IT handboek|GlobalProtect/, 'the IT document is not the HR desk\'s');
  assert.equal(twilioApi.messages.at(-1)!.from, `whatsapp:${HR}`);
  assert.equal(twilioApi.messages.at(-1)!.to, `whatsapp:${ANNA}`);

  const it = await ask(IT);
  assert.match(it.system, /^You are the IT desk of Meridiaan/);
  assert.match(it.data, /title="IT handboek"/, 'tags are compared in lower case');
  assert.doesNotMatch(it.data, /HR handboek|vakantiedagen per jaar/);
  assert.equal(twilioApi.messages.at(-1)!.from, `whatsapp:${IT}`);
  assert.notEqual(it.conversationId, hr.conversationId, 'one contact, two numbers: two conversations');

  // The default sender: the plain settings, every document.
  const plain = await ask(FROM_NUMBER.slice('whatsapp:'.length));
  assert.match(plain.system, /^You are the WhatsApp assistant of our organisation/);
  assert.match(plain.data, /HR handboek/);
  assert.match(plain.data, /IT handboek/);
  assert.equal(twilioApi.messages.at(-1)!.from, FROM_NUMBER);
  const numbers = await t.db.query<{ business_number: string | null }>(
    `select c.business_number from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = $1 order by c.created_at`,
    [ANNA],
  );
  assert.deepEqual(numbers.rows.map((r) => r.business_number), [HR, IT, null], 'the default sender is stored as null, as before several numbers');

  // A second message to the HR desk stays in its thread.
  const again = await ask(HR, 'En wanneer wordt het salaris betaald?');
  assert.equal(again.conversationId, hr.conversationId);

  // The dashboard: one number at a time, and each thread says which number it is on.
  const list = await m.app.inject({ method: 'GET', url: `/admin/conversations?number=${encodeURIComponent(HR)}` });
  assert.equal(list.statusCode, 200);
  assert.ok(list.body.includes(`/admin/conversations/${hr.conversationId}`));
  assert.ok(!list.body.includes(`/admin/conversations/${it.conversationId}`));
  assert.match(list.body, /<option value="\+3197010000002">\+3197010000002 \(IT desk\)<\/option>/);
  // A search that finds nothing says so, not "No conversations yet".
  const none = await m.app.inject({ method: 'GET', url: '/admin/conversations?q=Nobody' });
  assert.match(none.body, /No conversation matches "Nobody"/);
  assert.doesNotMatch(none.body, /No conversations yet/);
  const defaults = await m.app.inject({ method: 'GET', url: '/admin/conversations?number=default' });
  assert.ok(defaults.body.includes(`/admin/conversations/${plain.conversationId}`) && !defaults.body.includes(hr.conversationId));
  const thread = await m.app.inject({ method: 'GET', url: `/admin/conversations/${it.conversationId}` });
  assert.match(thread.body, /Writes to \+3197010000002 \(IT desk\)/);
  const api = await m.app.inject({ method: 'GET', url: `/api/conversations?number=${encodeURIComponent(IT)}` });
  assert.deepEqual(JSON.parse(api.body).conversations.map((c: { id: string }) => c.id), [it.conversationId]);
  assert.equal((await m.app.inject({ method: 'GET', url: '/api/conversations?number=12345' })).statusCode, 400);
  // Typed as README writes it, the + not encoded (a query string reads it as a space), or left out: a 400 before.
  for (const written of [IT, IT.slice(1)]) {
    const typed = await m.app.inject({ method: 'GET', url: `/api/conversations?number=${written}` });
    assert.equal(typed.statusCode, 200, `${written}: ${typed.body}`);
    assert.deepEqual(JSON.parse(typed.body).conversations.map((c: { id: string }) => c.id), [it.conversationId]);
    assert.ok((await m.app.inject({ method: 'GET', url: `/admin/conversations?number=${written}` })).body.includes(`/admin/conversations/${it.conversationId}`));
  }
});

test('a wrong profiles file stops the start with a reason that names PROFILES_FILE', () => {
  const bad = (content: unknown) => {
    const file = join(dir, `bad-${Math.random()}.json`);
    writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
    return () => new Profiles(loadConfig({ PROFILES_FILE: file }));
  };
  assert.throws(bad('{ not json'), /^Error: PROFILES_FILE: .*bad-.*\.json: /);
  assert.throws(bad({ profiles: [{ number: '0612345678', name: 'HR' }] }), /PROFILES_FILE: .*profiles\.0\.number: must be an E\.164 number/);
  assert.throws(bad({ profiles: [{ number: HR, name: 'A' }, { number: HR, name: 'B' }] }), /\+3197010000001 has two profiles/);
  assert.throws(bad({ profiles: [{ number: HR, name: 'A', colour: 'blue' }] }), /Unrecognized key/);
  assert.throws(() => new Profiles(loadConfig({ PROFILES_FILE: join(dir, 'missing.json') })), /PROFILES_FILE: .*missing\.json: ENOENT/);
  // Variables for a template the profile does not name would fill the default one silently.
  assert.throws(bad({ profiles: [{ number: HR, name: 'HR', templateVariables: '1=name,2=reply' }] }), /\+3197010000001 has templateVariables but no templateSid/);
});

test("a profile for the default sender's own number is that number's profile, not ignored", () => {
  const file = join(dir, 'reception.json');
  const from = FROM_NUMBER.slice('whatsapp:'.length);
  writeFileSync(file, JSON.stringify({ profiles: [{ number: from, name: 'Reception', systemPromptFile: 'hr.txt', documentTags: ['Public'] }, { number: IT, name: 'IT desk' }] }));
  const profiles = new Profiles({ PROFILES_FILE: file, TWILIO_WHATSAPP_FROM: FROM_NUMBER, WHATSAPP_TEMPLATE_VARIABLES: '1=reply' });
  // Its conversations are stored without a number, as the default sender's always were.
  const number = profiles.conversationNumber(FROM_NUMBER);
  assert.equal(number, null);
  const profile = profiles.of(number);
  assert.deepEqual([profile.name, profile.documentTags, profile.systemPromptFile], ['Reception', ['public'], join(dir, 'hr.txt')]);
  assert.deepEqual(profiles.all().map((p) => p.name), ['Reception', 'Default', 'IT desk'], "the default sender's, the plain one, the named");
  assert.equal(profiles.of(IT).name, 'IT desk');
  // A number the file does not name keeps the plain settings, not the default sender's desk.
  assert.deepEqual([profiles.of('+3197010000099').name, profiles.of('+3197010000099').documentTags], ['Default', null]);
  // Without a prompt file of its own, the default sender's profile keeps SYSTEM_PROMPT_FILE.
  writeFileSync(file, JSON.stringify({ profiles: [{ number: from, name: 'Reception', documentTags: ['Public'] }] }));
  const promptless = new Profiles({ PROFILES_FILE: file, SYSTEM_PROMPT_FILE: '/etc/aiq/prompt.txt', TWILIO_WHATSAPP_FROM: FROM_NUMBER, WHATSAPP_TEMPLATE_VARIABLES: '1=reply' });
  assert.equal(promptless.of(null).systemPromptFile, '/etc/aiq/prompt.txt');
  // A number the file does not name is answered with the default profile; the webhook warns (once).
  assert.deepEqual([profiles.unnamed('+3197010000099'), profiles.unnamed(IT), profiles.unnamed(null)], [true, false, false]);
  assert.equal(new Profiles({ TWILIO_WHATSAPP_FROM: FROM_NUMBER, WHATSAPP_TEMPLATE_VARIABLES: '1=reply' }).unnamed('+3197010000099'), false, 'without a profiles file every number is the default');
});

test("a profile's unreadable prompt file stops the start naming the profile, not SYSTEM_PROMPT_FILE", async () => {
  const file = join(dir, 'missing-prompt.json');
  writeFileSync(file, JSON.stringify({ profiles: [{ number: HR, name: 'HR desk', systemPromptFile: 'nowhere.txt' }] }));
  await assert.rejects(
    startMessagingApp(messagingEnv(t.url, twilioApi.url, { PROFILES_FILE: file })).then((app) => app.startWorker().finally(() => app.close())),
    /PROFILES_FILE: .*missing-prompt\.json: \+3197010000001 \(HR desk\) systemPromptFile: cannot read .*nowhere\.txt/,
  );
});
