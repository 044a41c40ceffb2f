// What the AI costs: prices from AI_PRICES, tokens from ai_usage per day, model and purpose,
// through the admin API; tokens as Prometheus counters from real calls to the fake OpenAI.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pricesParse } from '../src/ai/costs.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi, fakeOpenAiEnv } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

let t: TestDatabase;
let twilio: FakeTwilio;
let openai: FakeOpenAi;
let m: MessagingApp;
before(async () => {
  [t, twilio, openai] = await Promise.all([freshServerDatabase(), startFakeTwilio(), startFakeOpenAi()]);
  m = await startMessagingApp(
    messagingEnv(t.url, twilio.url, { ...fakeOpenAiEnv(openai), AI_PRICES: 'gpt-4o-mini=0.15/0.60,text-embedding-3-small=0.02', AI_PRICE_CURRENCY: 'EUR' }),
    { listen: true },
  );
  await m.startWorker();
});
after(async () => {
  await m.close();
  await Promise.all([t.close(), twilio.close(), openai.close()]);
});

test('prices parse per million tokens; a bad entry is a config error naming AI_PRICES', () => {
  assert.deepEqual(pricesParse('gpt-4o-mini=0.15/0.60, text-embedding-3-small=0.02'), { 'gpt-4o-mini': { prompt: 0.15, completion: 0.6 }, 'text-embedding-3-small': { prompt: 0.02, completion: 0 } });
  assert.throws(() => loadConfig({ AI_PRICES: 'gpt-4o-mini=cheap' }), (err: Error) => err instanceof ConfigError && /AI_PRICES.*"gpt-4o-mini=cheap" is not model=prompt\/completion/.test(err.message));
  // A transcription model billed by the audio's length: per minute.
  assert.deepEqual(pricesParse('whisper-1=0.006/min'), { 'whisper-1': { prompt: 0, completion: 0, perMinute: 0.006 } });
  assert.equal(loadConfig({}).AI_PRICES['whisper-1']?.perMinute, 0.006, 'the default transcription model has its list price');
});

test('transcribed audio is priced per minute; without a price per minute it is unpriced, not free', async () => {
  await t.db.query(`insert into ai_usage (purpose, provider, model, operation, prompt_tokens, completion_tokens, total_tokens, audio_seconds, created_at) values
    ('autoreply', 'openai', 'whisper-1', 'transcribe', 0, 0, 0, 90, now()),
    ('suggest', 'openai', 'whisper-1', 'transcribe', 0, 0, 0, 30, now()),
    ('autoreply', 'openai', 'text-embedding-3-small', 'transcribe', 0, 0, 0, 60, now() - interval '2 days')`);
  const { usageReport } = await import('../src/ai/costs.ts');
  const report = await usageReport(t.db, pricesParse('whisper-1=0.006/min,text-embedding-3-small=0.02'), 'USD', 7);
  const whisper = report.rows.filter((r) => r.model === 'whisper-1');
  assert.deepEqual(whisper.map((r) => [r.purpose, r.audioSeconds, r.cost?.toFixed(4)]), [['autoreply', 90, '0.0090'], ['suggest', 30, '0.0030']]);
  // A price per token for a row of audio seconds would count them free: unpriced instead.
  assert.equal(report.rows.find((r) => r.model === 'text-embedding-3-small' && r.audioSeconds === 60)?.cost, null);
  assert.ok(report.unpriced.includes('text-embedding-3-small'));
  assert.equal(report.totalAudioSeconds, 180);
  const page = await m.app.inject({ method: 'GET', url: '/admin/usage?days=7' });
  assert.equal(page.statusCode, 200);
  assert.match(page.body, /and 3 min of transcribed audio/);
  assert.match(page.body, /<td>whisper-1<\/td><td>autoreply<\/td><td class="num">0<\/td><td class="num">0<\/td><td class="num">1\.5 min<\/td>/);
  await t.db.query(`delete from ai_usage where operation = 'transcribe'`);
});

test('the cost report prices each model (dated versions by their family), and says which have no price', async () => {
  await t.db.query(`insert into ai_usage (purpose, provider, model, operation, prompt_tokens, completion_tokens, total_tokens, created_at) values
    ('autoreply', 'openai', 'gpt-4o-mini-2024-07-18', 'chat', 1000000, 100000, 1100000, now()),
    ('embed_record', 'openai', 'text-embedding-3-small', 'embed', 500000, 0, 500000, now() - interval '1 day'),
    ('suggest', 'openai', 'some-new-model', 'chat', 10, 5, 15, now()),
    ('autoreply', 'openai', 'gpt-4o-mini', 'chat', 999, 1, 1000, now() - interval '40 days')`);
  const response = await m.app.inject({ method: 'GET', url: '/api/usage?days=30' });
  assert.equal(response.statusCode, 200, response.body);
  const report = response.json();
  assert.equal(report.currency, 'EUR');
  const chat = report.rows.find((r: { model: string }) => r.model === 'gpt-4o-mini-2024-07-18');
  assert.equal(chat.cost.toFixed(2), '0.21'); // 1M × 0.15 + 0.1M × 0.60 per million
  assert.equal(report.rows.find((r: { model: string }) => r.model === 'text-embedding-3-small').cost.toFixed(2), '0.01');
  assert.equal(report.rows.find((r: { model: string }) => r.model === 'some-new-model').cost, null);
  assert.deepEqual(report.unpriced, ['some-new-model']);
  assert.equal(report.rows.some((r: { day: string; model: string }) => r.model === 'gpt-4o-mini'), false, 'older than the period');
  assert.equal(report.totalCost.toFixed(2), '0.22');
  assert.equal((await m.app.inject({ method: 'GET', url: '/api/usage?days=0' })).statusCode, 400);
});

test('tokens of real calls are Prometheus counters by model, operation and kind', async () => {
  const response = await injectSigned(m.app, '/webhooks/twilio/whatsapp', inboundParams('Hoeveel vakantiedagen heb ik?'), { signedUrl: `${m.url}/webhooks/twilio/whatsapp` });
  assert.equal(response.statusCode, 200);
  await waitFor(() => twilio.messages.length > 0, 'the reply');
  const metrics = (await m.app.inject({ method: 'GET', url: '/metrics' })).body;
  assert.match(metrics, /aiq_ai_tokens_total\{provider="openai",model="[^"]+",operation="chat",kind="prompt"\} [1-9]\d*/);
  assert.match(metrics, /aiq_ai_tokens_total\{provider="openai",model="[^"]+",operation="chat",kind="completion"\} [1-9]\d*/);
});
