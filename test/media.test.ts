// Voice notes and photos over real HTTP, a real worker, the fake Twilio (media behind basic
// auth, with a redirect, as Twilio serves them) and the fake OpenAI (transcriptions): a
// voice note is fetched with the account's credentials, transcribed, and its transcript is
// what the model reads; a photo reads as one the assistant cannot see. A 50 MB file is not
// fetched, a URL or a redirect to another host is never requested, a content type that lies
// and an empty file are refused; each with its reason, and the message is still answered.
import assert from 'node:assert/strict';
import { lookup } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, LookupFunction } from 'node:net';
import { after, before, test } from 'node:test';
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { loadConfig } from '../src/config.ts';
import { mediaDepsOf } from '../src/jobs/media-process.ts';
import { conversationAiPausedSet } from '../src/messaging/conversations.ts';
import { mediaFetch } from '../src/messaging/media.ts';
import { jobGet, jobRetry } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi, fakeOpenAiEnv } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
const OGG = Buffer.concat([Buffer.from('OggS'), Buffer.alloc(2000, 7)]);
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(3000, 1)]);

let t: TestDatabase;
let llm: FakeOpenAi;
let twilioApi: FakeTwilio;
let m: MessagingApp;
let elsewhere: Server;
let elsewhereUrl = '';
const elsewhereHits: string[] = [];
let sidCounter = 0;

before(async () => {
  t = await freshServerDatabase();
  llm = await startFakeOpenAi({ transcript: (raw) => (raw.includes('OggS') ? 'Hoeveel vakantiedagen heb ik nog over dit jaar?' : 'no audio in the request') });
  twilioApi = await startFakeTwilio();
  elsewhere = createServer((req, res) => {
    elsewhereHits.push(req.url ?? '');
    res.end('secret');
  });
  await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
  elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
  m = await startMessagingApp(messagingEnv(t.url, twilioApi.url, fakeOpenAiEnv(llm, 64)));
  await m.startWorker();
});
after(async () => {
  await m?.close();
  await llm?.close();
  await twilioApi?.close();
  await new Promise((resolve) => elsewhere?.close(resolve));
  await t?.close();
});

function mediaSid(): string {
  sidCounter += 1;
  return `ME${String(sidCounter).padStart(32, '0')}`;
}

/** Sends a WhatsApp message with media as Twilio posts it; waits for its reply job; returns what the model read and the media rows. */
async function receive(body: string, media: Array<{ url: string; type: string }>, from = '+31612345678') {
  const params = inboundParams(body, from, {
    NumMedia: String(media.length),
    ...Object.fromEntries(media.flatMap((item, n) => [[`MediaUrl${n}`, item.url], [`MediaContentType${n}`, item.type]])),
  });
  const before = llm.chatRequests().length;
  assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
  const row = await t.db.query<{ job_id: string; message_id: string; conversation_id: string }>(
    `select j.id as job_id, m.id as message_id, m.conversation_id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
    [params.MessageSid],
  );
  const { job_id: jobId, message_id: messageId, conversation_id: conversationId } = row.rows[0]!;
  await waitFor(async () => (await jobGet(t.db, jobId))?.status === 'done', `the reply to "${body}"`, 20_000);
  const prompt = llm.chatRequests()[before]!.body.messages as Array<{ role: string; content: string }>;
  const rows = await t.db.query<{ id: string; status: string; transcript: string | null; note: string | null; size: number | null }>(
    'select id, status, transcript, note, size from message_media where message_id = $1 order by position',
    [messageId],
  );
  return { prompt, media: rows.rows, conversationId };
}

test('a voice note is fetched with the credentials, transcribed, and its transcript is what the model reads; a photo reads as unseen', async () => {
  const voice = mediaSid();
  const photo = mediaSid();
  twilioApi.media.set(voice, { bytes: OGG, contentType: 'audio/ogg' });
  twilioApi.media.set(photo, { bytes: JPEG, contentType: 'image/jpeg' });
  const { prompt, media, conversationId } = await receive('', [
    { url: twilioApi.mediaUrl(voice), type: 'audio/ogg' },
    { url: twilioApi.mediaUrl(photo), type: 'image/jpeg' },
  ]);
  const fetched = twilioApi.requests.filter((r) => r.outcome === 'media');
  assert.equal(fetched.length, 2);
  assert.ok(fetched.every((r) => r.authorized), 'fetched with the account SID and auth token');
  const transcription = llm.requests.find((r) => r.endpoint === 'transcription')!;
  assert.ok(String(transcription.body).includes('OggS'), 'the voice note itself went to the transcription');
  assert.equal(prompt.at(-1)!.content, '[voice note] Hoeveel vakantiedagen heb ik nog over dit jaar?\n[an image the assistant cannot see]');
  assert.deepEqual(
    media.map((r) => [r.status, r.transcript, r.size]),
    [
      ['stored', 'Hoeveel vakantiedagen heb ik nog over dit jaar?', OGG.length],
      ['stored', null, JPEG.length],
    ],
  );
  // The embedding of the question was made from the transcript: retrieval reads it too.
  assert.ok(llm.embeddingRequests().some((r) => JSON.stringify(r.body.input).includes('vakantiedagen')));
  // What the transcription cost is recorded with the reply's: whisper-1 by the audio's length,
  // priced per minute in the cost report (default AI_PRICES).
  const usage = await t.db.query<{ purpose: string; model: string; subject_id: string; audio_seconds: string; total_tokens: number }>(
    `select u.purpose, u.model, u.subject_id, u.audio_seconds::text, u.total_tokens from ai_usage u where u.operation = 'transcribe'`,
  );
  const voiceMessage = await t.db.query<{ message_id: string }>('select message_id from message_media where id = $1', [media[0]!.id]);
  assert.deepEqual(usage.rows, [{ purpose: 'autoreply', model: 'whisper-1', subject_id: voiceMessage.rows[0]!.message_id, audio_seconds: '7', total_tokens: 0 }]);
  const costs = JSON.parse((await m.app.inject({ method: 'GET', url: '/api/usage?days=7' })).body);
  const transcribed = costs.rows.find((r: { model: string }) => r.model === 'whisper-1');
  assert.equal(transcribed.audioSeconds, 7);
  assert.equal(transcribed.cost.toFixed(4), '0.0007'); // 7 s at 0.006 a minute

  const page = await m.app.inject({ method: 'GET', url: `/admin/conversations/${conversationId}` });
  assert.match(page.body, new RegExp(`<audio controls preload="none" src="/admin/media/${media[0]!.id}"></audio><span class="meta transcript">transcript: <span dir="auto">Hoeveel vakantiedagen`));
  assert.match(page.body, new RegExp(`<img src="/admin/media/${media[1]!.id}"`));
  const file = await m.app.inject({ method: 'GET', url: `/admin/media/${media[0]!.id}` });
  assert.equal(file.statusCode, 200);
  assert.equal(file.headers['content-type'], 'audio/ogg');
  assert.equal(file.headers['x-content-type-options'], 'nosniff');
  assert.equal(file.headers['cache-control'], 'no-store', 'not kept in the browser past an erasure');
  // The API's answers hold the same personal data: never cached, never sniffed.
  const api = await m.app.inject({ method: 'GET', url: `/api/conversations/${conversationId}` });
  assert.equal(api.statusCode, 200);
  assert.equal(api.headers['cache-control'], 'no-store');
  assert.equal(api.headers['x-content-type-options'], 'nosniff');
  assert.deepEqual(file.rawPayload, OGG);
  // The transcript is personal data: an export hands it over.
  const exported = JSON.parse((await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent('+31612345678')}` })).body);
  const withMedia = exported.conversations[0].messages.find((msg: { media: unknown[] }) => msg.media.length > 0);
  assert.deepEqual(withMedia.media[0], { contentType: 'audio/ogg', status: 'stored', size: OGG.length, transcript: 'Hoeveel vakantiedagen heb ik nog over dit jaar?' });
});

test('too large, another host, a redirect elsewhere, a lying type, an empty file: each refused with its reason, the message still answered', async () => {
  const big = mediaSid();
  const redirected = mediaSid();
  const lying = mediaSid();
  const empty = mediaSid();
  const downgraded = mediaSid();
  twilioApi.media.set(big, { bytes: Buffer.concat([Buffer.from('OggS'), Buffer.alloc(50 * 1024 * 1024)]), contentType: 'audio/ogg' });
  twilioApi.media.set(redirected, { bytes: OGG, contentType: 'audio/ogg', redirectTo: `${elsewhereUrl}/stolen` });
  twilioApi.media.set(lying, { bytes: Buffer.from('%PDF-1.4 not a voice note'), contentType: 'audio/ogg' });
  twilioApi.media.set(empty, { bytes: Buffer.alloc(0), contentType: 'image/jpeg' });
  // The API host under another scheme: a redirect there would leave its scheme (here the
  // fake's http; in production https) for one the credentials must not travel over.
  const otherScheme = (url: string) => url.replace(/^http:/, 'https:');
  twilioApi.media.set(downgraded, { bytes: OGG, contentType: 'audio/ogg', redirectTo: otherScheme(`${twilioApi.url}/_cdn/${downgraded}`) });
  // A redirect back to the API: the credentials went along again, to any of its resources.
  const backToApi = mediaSid();
  twilioApi.media.set(backToApi, { bytes: OGG, contentType: 'text/plain', redirectTo: `${twilioApi.url}/2010-04-01/Accounts/${twilioApi.accountSid}/Messages.json` });
  const transcriptionsBefore = llm.requests.filter((r) => r.endpoint === 'transcription').length;
  const { prompt, media } = await receive('Kijk even naar deze bestanden', [
    { url: twilioApi.mediaUrl(big), type: 'audio/ogg' },
    { url: `${elsewhereUrl}/internal-admin`, type: 'image/jpeg' },
    { url: twilioApi.mediaUrl(redirected), type: 'audio/ogg' },
    { url: twilioApi.mediaUrl(lying), type: 'audio/ogg' },
    { url: twilioApi.mediaUrl(empty), type: 'image/jpeg' },
    { url: otherScheme(twilioApi.mediaUrl(big)), type: 'audio/ogg' },
    { url: twilioApi.mediaUrl(downgraded), type: 'audio/ogg' },
    { url: twilioApi.mediaUrl(big).replace('http://', 'http://someone:secret@'), type: 'audio/ogg' },
    // The API host, but not a media file of the account: its message log, other contacts'
    // numbers and texts, was fetched with the credentials and stored as the "file".
    { url: `${twilioApi.url}/2010-04-01/Accounts/${twilioApi.accountSid}/Messages.json?PageSize=50`, type: 'text/plain' },
    { url: twilioApi.mediaUrl(big).replace(twilioApi.accountSid, `AC${'f'.repeat(32)}`), type: 'audio/ogg' },
  ]);
  assert.deepEqual(elsewhereHits, [], 'no request ever left for another host');
  assert.deepEqual(media.map((r) => r.status), ['too_large', 'refused', 'refused', 'refused', 'failed', 'refused', 'refused', 'refused', 'refused', 'refused']);
  assert.match(media[0]!.note!, /52428804 bytes is over MEDIA_MAX_BYTES \(16777216 bytes\): not fetched/);
  assert.match(media[1]!.note!, /http:\/\/127\.0\.0\.1:\d+ is not the Twilio API \(http:\/\/127\.0\.0\.1:\d+\): never requested/);
  assert.match(media[2]!.note!, /redirected to 127\.0\.0\.1:\d+, which is not a Twilio media host/);
  assert.match(media[3]!.note!, /declared audio\/ogg, but the content is not audio\/ogg/);
  assert.match(media[4]!.note!, /empty/);
  assert.match(media[5]!.note!, /https:\/\/127\.0\.0\.1:\d+ is not the Twilio API \(http:/, 'the API host under another scheme is another origin');
  assert.match(media[6]!.note!, /redirected to https:\/\/ instead of http:\/\/: never requested/);
  assert.match(media[7]!.note!, /the URL carries a user name or password: never requested/);
  for (const refused of [media[8]!, media[9]!]) assert.match(refused.note!, /^not the address of a media file of this Twilio account: never requested$/);
  assert.ok(media.every((r) => r.size === null), 'nothing kept');
  assert.equal(llm.requests.filter((r) => r.endpoint === 'transcription').length, transcriptionsBefore, 'nothing transcribed');
  // The model reads what became of each file, never why: it would repeat our checks' and
  // Twilio's words (an internal address, a status code) to the contact.
  const question = prompt.at(-1)!.content;
  assert.deepEqual(question.split('\n'), ['Kijk even naar deze bestanden', '[an attachment too large to open]', ...Array<string>(9).fill('[an attachment that could not be opened]')]);
  const back = await receive('En deze?', [{ url: twilioApi.mediaUrl(backToApi), type: 'text/plain' }]);
  assert.deepEqual(back.media.map((r) => r.status), ['failed']);
  assert.match(back.media[0]!.note!, /^Twilio answered 401 for the media/, 'the redirect was followed without the credentials');
});

test('with the default settings, Twilio\'s redirect to its media CDN (mms.twiliocdn.com) is followed, without the credentials', async () => {
  // Twilio answers every media URL with a redirect to mms.twiliocdn.com. Its real host names
  // resolve here to local servers (the fake Twilio and a CDN that records what it is sent),
  // so the configuration is the one a deployment has when it sets nothing.
  const cdnRequests: Array<{ url: string; authorization?: string }> = [];
  const cdn = createServer((req, res) => {
    cdnRequests.push({ url: req.url ?? '', authorization: req.headers.authorization });
    res.writeHead(200, { 'content-type': 'audio/ogg', 'content-length': String(OGG.length) });
    res.end(OGG);
  });
  await new Promise<void>((resolve) => cdn.listen(0, '127.0.0.1', resolve));
  const local = new Set(['api.twilio.com', 'mms.twiliocdn.com']);
  const resolveLocal: LookupFunction = (host, options, callback) => {
    if (!local.has(host)) return lookup(host, options, callback);
    if (options.all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
    else callback(null, '127.0.0.1', 4);
  };
  const previous = getGlobalDispatcher();
  setGlobalDispatcher(new Agent({ connect: { lookup: resolveLocal } }));
  try {
    const apiUrl = `http://api.twilio.com:${new URL(twilioApi.url).port}`;
    const config = loadConfig(messagingEnv(t.url, apiUrl));
    const settings = mediaDepsOf({ db: t.db, ai: m.runtime.ai, config }).fetch;
    const sid = mediaSid();
    const cdnUrl = `http://mms.twiliocdn.com:${(cdn.address() as AddressInfo).port}/${twilioApi.accountSid}/0685c8ad1b86205fa8dccd71765156c7?Expires=1631090890&Signature=KI4MPwaW`;
    twilioApi.media.set(sid, { bytes: OGG, contentType: 'audio/ogg', redirectTo: cdnUrl });
    const fetched = await mediaFetch(twilioApi.mediaUrl(sid).replace(twilioApi.url, apiUrl), 'audio/ogg', settings);
    assert.equal(fetched.status, 'stored', 'note' in fetched ? fetched.note : '');
    assert.deepEqual(fetched.status === 'stored' && Buffer.from(fetched.bytes), OGG);
    assert.deepEqual(cdnRequests, [{ url: new URL(cdnUrl).pathname + new URL(cdnUrl).search, authorization: undefined }]);
  } finally {
    setGlobalDispatcher(previous);
    await new Promise((resolve) => cdn.close(resolve));
  }
});

test('a download cut off halfway is retried, and on the last attempt recorded as failed and the message answered on its text', async () => {
  const sid = mediaSid();
  twilioApi.media.set(sid, { bytes: OGG, contentType: 'audio/ogg', cut: true });
  const params = inboundParams('Hoor je dit?', '+31612340099', { NumMedia: '1', MediaUrl0: twilioApi.mediaUrl(sid), MediaContentType0: 'audio/ogg' });
  const chatsBefore = llm.chatRequests().length;
  assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
  const { rows } = await t.db.query<{ job_id: string; message_id: string }>(
    `select j.id as job_id, m.id as message_id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
    [params.MessageSid],
  );
  const { job_id: jobId, message_id: messageId } = rows[0]!;
  // The first attempt: a connection lost mid-file may pass, so the job is retried.
  await waitFor(async () => (await jobGet(t.db, jobId))?.attempts === 1 && (await jobGet(t.db, jobId))?.status === 'pending', 'the first attempt to fail', 20_000);
  const first = await jobGet(t.db, jobId);
  assert.match(first!.lastError ?? '', /media/, 'the error says it was the media');
  // Its last attempt, now: the file is given up on and the message answered without it.
  await t.db.query(`update ai_jobs set max_attempts = 2, next_run_at = now() where id = $1`, [jobId]);
  await waitFor(async () => ['done', 'failed'].includes((await jobGet(t.db, jobId))!.status), 'the last attempt', 20_000);
  const job = await jobGet(t.db, jobId);
  assert.equal(job!.status, 'done', `the job ended ${job!.status}: ${job!.lastError}`);
  const media = await t.db.query<{ status: string; note: string | null }>('select status, note from message_media where message_id = $1', [messageId]);
  assert.equal(media.rows[0]!.status, 'failed');
  assert.match(media.rows[0]!.note!, /gave up after the last attempt/);
  assert.equal(llm.chatRequests()[chatsBefore]!.body.messages.at(-1).content, 'Hoor je dit?\n[an attachment that could not be opened]');
});

test('a voice note sent while a human has taken over is still fetched and transcribed, for the admin who answers it', async () => {
  const from = '+31612340077';
  const first = await receive('Hallo', [], from);
  assert.ok(await conversationAiPausedSet(t.db, first.conversationId, true));
  const voice = mediaSid();
  twilioApi.media.set(voice, { bytes: OGG, contentType: 'audio/ogg' });
  const params = inboundParams('', from, { NumMedia: '1', MediaUrl0: twilioApi.mediaUrl(voice), MediaContentType0: 'audio/ogg' });
  const chatsBefore = llm.chatRequests().length;
  assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
  const { rows } = await t.db.query<{ job_id: string; message_id: string }>(
    `select j.id as job_id, m.id as message_id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
    [params.MessageSid],
  );
  await waitFor(async () => (await jobGet(t.db, rows[0]!.job_id))?.status === 'done', 'the reply job', 20_000);
  assert.deepEqual((await jobGet(t.db, rows[0]!.job_id))!.result, { skipped: 'ai_paused' });
  assert.equal(llm.chatRequests().length, chatsBefore, 'no reply was composed');
  const media = await t.db.query<{ id: string; status: string; transcript: string | null }>('select id, status, transcript from message_media where message_id = $1', [rows[0]!.message_id]);
  assert.deepEqual(media.rows.map((r) => [r.status, r.transcript]), [['stored', 'Hoeveel vakantiedagen heb ik nog over dit jaar?']]);
  const page = await m.app.inject({ method: 'GET', url: `/admin/conversations/${first.conversationId}` });
  assert.match(page.body, new RegExp(`<audio controls preload="none" src="/admin/media/${media.rows[0]!.id}"></audio><span class="meta transcript">transcript: <span dir="auto">Hoeveel vakantiedagen`));
});

test('a webhook with a media count but no URL is refused (400) and stores nothing', async () => {
  const params = inboundParams('x', '+31699990000', { NumMedia: '1' });
  const response = await injectSigned(m.app, WHATSAPP, params);
  assert.equal(response.statusCode, 400);
  assert.match(response.body, /MediaUrl0 must be a URL/);
  // A NUL in it, which PostgreSQL cannot store: malformed too, not a 500.
  const nul = await injectSigned(m.app, WHATSAPP, inboundParams('x', '+31699990000', { NumMedia: '1', MediaUrl0: 'https://api.twilio.com/x\u0000y' }));
  assert.equal(nul.statusCode, 400, nul.body);
  assert.match(nul.body, /MediaUrl0 must be a URL/);
});

test('media refused for the account\'s credentials (a rotated auth token) fail the job and stay pending; the retry with the right token hears the voice note', async () => {
  const tokenDb = await freshServerDatabase();
  const wrong = await startMessagingApp(messagingEnv(tokenDb.url, twilioApi.url, { ...fakeOpenAiEnv(llm, 64), TWILIO_AUTH_TOKEN: 'f'.repeat(32) }));
  const voice = mediaSid();
  twilioApi.media.set(voice, { bytes: OGG, contentType: 'audio/ogg' });
  const params = inboundParams('', '+31688880001', { NumMedia: '1', MediaUrl0: twilioApi.mediaUrl(voice), MediaContentType0: 'audio/ogg' });
  let jobId = '';
  let messageId = '';
  try {
    await wrong.startWorker();
    assert.equal((await injectSigned(wrong.app, WHATSAPP, params, { token: 'f'.repeat(32) })).statusCode, 200);
    const { rows } = await tokenDb.db.query<{ job_id: string; message_id: string }>(
      `select j.id as job_id, m.id as message_id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
      [params.MessageSid],
    );
    ({ job_id: jobId, message_id: messageId } = rows[0]!);
    await waitFor(async () => (await jobGet(tokenDb.db, jobId))?.status === 'failed', 'the job to fail', 20_000);
  } finally {
    await wrong.close();
  }
  assert.match((await jobGet(tokenDb.db, jobId))!.lastError!, /Twilio refused the account's credentials \(401\) for the media: check TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN/);
  const media = async () => (await tokenDb.db.query<{ status: string; transcript: string | null }>('select status, transcript from message_media where message_id = $1', [messageId])).rows;
  assert.deepEqual(await media(), [{ status: 'pending', transcript: null }], 'the file is not given up on for our credentials');

  // The token put right, the admin retries the job: the voice note is heard.
  const right = await startMessagingApp(messagingEnv(tokenDb.url, twilioApi.url, fakeOpenAiEnv(llm, 64)));
  try {
    await right.startWorker();
    assert.ok(await jobRetry(tokenDb.db, jobId));
    await waitFor(async () => (await jobGet(tokenDb.db, jobId))?.status === 'done', 'the retried job', 20_000);
    assert.deepEqual(await media(), [{ status: 'stored', transcript: 'Hoeveel vakantiedagen heb ik nog over dit jaar?' }]);
    assert.equal(llm.chatRequests().at(-1)!.body.messages.at(-1).content, '[voice note] Hoeveel vakantiedagen heb ik nog over dit jaar?');
  } finally {
    await right.close();
    await tokenDb.close();
  }
});

test('with AI_VISION, a photo reaches the chat model as image input', async () => {
  const visionDb = await freshServerDatabase();
  const vision = await startMessagingApp(
    messagingEnv(visionDb.url, twilioApi.url, { ...fakeOpenAiEnv(llm, 64), AI_VISION: 'true' }),
  );
  try {
    await vision.startWorker();
    const photo = mediaSid();
    twilioApi.media.set(photo, { bytes: JPEG, contentType: 'image/jpeg' });
    const params = inboundParams('Wat staat er op deze foto?', '+31688887777', { NumMedia: '1', MediaUrl0: twilioApi.mediaUrl(photo), MediaContentType0: 'image/jpeg' });
    const before = llm.chatRequests().length;
    assert.equal((await injectSigned(vision.app, WHATSAPP, params)).statusCode, 200);
    await waitFor(() => llm.chatRequests().length > before, 'the chat request', 20_000);
    const last = llm.chatRequests()[before]!.body.messages.at(-1);
    assert.equal(last.role, 'user');
    assert.deepEqual(last.content, [
      { type: 'text', text: 'Wat staat er op deze foto?\n[a photo, attached]' },
      { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG.toString('base64')}` } },
    ]);

    // An iPhone photo sent as a document comes as image/heic, which the model refuses (400):
    // the whole reply failed for it. It reads as an image the assistant cannot see; a photo
    // beside it in the same message is still attached.
    const heic = mediaSid();
    const photo2 = mediaSid();
    const HEIC = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypheic'), Buffer.alloc(500, 2)]);
    twilioApi.media.set(heic, { bytes: HEIC, contentType: 'image/heic' });
    twilioApi.media.set(photo2, { bytes: JPEG, contentType: 'image/jpeg' });
    const document = inboundParams('En deze?', '+31688887778', {
      NumMedia: '2',
      MediaUrl0: twilioApi.mediaUrl(heic),
      MediaContentType0: 'image/heic',
      MediaUrl1: twilioApi.mediaUrl(photo2),
      MediaContentType1: 'image/jpeg',
    });
    assert.equal((await injectSigned(vision.app, WHATSAPP, document)).statusCode, 200);
    const job = await visionDb.db.query<{ id: string }>(`select j.id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`, [document.MessageSid]);
    await waitFor(async () => ['done', 'failed'].includes((await jobGet(visionDb.db, job.rows[0]!.id))!.status), 'the reply to the document', 20_000);
    const ended = await jobGet(visionDb.db, job.rows[0]!.id);
    assert.equal(ended!.status, 'done', `the job ended ${ended!.status}: ${ended!.lastError}`);
    assert.deepEqual(llm.chatRequests().at(-1)!.body.messages.at(-1).content, [
      { type: 'text', text: 'En deze?\n[an image the assistant cannot see]\n[a photo, attached]' },
      { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG.toString('base64')}` } },
    ]);
  } finally {
    await vision.close();
    await visionDb.close();
  }
});
