// A real `aiq worker` process SIGKILLed while it fetches a voice note, and another while it
// has it transcribed: the file stays pending, the job is reclaimed when its lease runs out,
// the next worker processes the media and the message gets exactly one reply.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { jobGet, jobRetry, Worker } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi, fakeOpenAiEnv } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
const OGG = Buffer.concat([Buffer.from('OggS'), Buffer.alloc(1000, 3)]);

let t: TestDatabase;
let llm: FakeOpenAi;
let twilioApi: FakeTwilio;
let m: MessagingApp;
let env: Record<string, string>;

before(async () => {
  t = await freshServerDatabase();
  llm = await startFakeOpenAi({ transcript: () => 'Mijn laptop start niet op, wat nu?' });
  twilioApi = await startFakeTwilio();
  env = messagingEnv(t.url, twilioApi.url, { ...fakeOpenAiEnv(llm, 64), LOG_LEVEL: 'info', JOB_LEASE_SECONDS: '30' });
  m = await startMessagingApp(env);
});
after(async () => {
  await m?.close();
  await llm?.close();
  await twilioApi?.close();
  await t?.close();
});

/** Starts a worker process, lets `stall` hold it at the moment to test, then SIGKILLs it. */
async function killWorkerWhen(stalled: () => boolean, what: string): Promise<void> {
  const child = spawn(process.execPath, ['bin/aiq.js', 'worker'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  try {
    await waitFor(() => output.includes('worker started'), `the worker process to start:\n${output}`, 60_000);
    await waitFor(stalled, what, 30_000);
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');
  } finally {
    child.kill('SIGKILL');
  }
}

for (const moment of ['download', 'transcription'] as const) {
  test(`killed during the ${moment} of a voice note: one reply, from the next worker`, async () => {
    const sid = `ME${(moment === 'download' ? '1' : '2').repeat(32)}`;
    const from = moment === 'download' ? '+31611110001' : '+31611110002';
    if (moment === 'download') twilioApi.media.set(sid, { bytes: OGG, contentType: 'audio/ogg', hang: true });
    else {
      twilioApi.media.set(sid, { bytes: OGG, contentType: 'audio/ogg' });
      llm.failNext({ kind: 'hang' }, { endpoint: 'transcription' });
    }
    const params = inboundParams('', from, { NumMedia: '1', MediaUrl0: twilioApi.mediaUrl(sid), MediaContentType0: 'audio/ogg' });
    assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
    const stalled =
      moment === 'download'
        ? () => twilioApi.requests.some((r) => r.outcome === 'media-hang')
        : () => llm.requests.some((r) => r.endpoint === 'transcription' && r.outcome === 'hang');
    await killWorkerWhen(stalled, `the worker to stall in the ${moment}`);

    const row = await t.db.query<{ job_id: string; message_id: string }>(
      `select j.id as job_id, m.id as message_id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
      [params.MessageSid],
    );
    const { job_id: jobId, message_id: messageId } = row.rows[0]!;
    const media = async () => (await t.db.query<{ status: string; transcript: string | null }>('select status, transcript from message_media where message_id = $1', [messageId])).rows;
    assert.deepEqual(await media(), [{ status: 'pending', transcript: null }], 'nothing half-recorded');
    assert.equal((await jobGet(t.db, jobId))!.status, 'processing', 'the dead worker still holds the job');

    // The lease runs out (moved by SQL, not waited for); the next worker takes the job.
    twilioApi.media.set(sid, { bytes: OGG, contentType: 'audio/ogg' });
    await t.db.query(`update ai_jobs set locked_until = now() - interval '1 second' where id = $1`, [jobId]);
    const worker = await m.startWorker();
    try {
      await waitFor(async () => (await jobGet(t.db, jobId))?.status === 'done', 'the reclaimed job to finish', 30_000);
    } finally {
      await worker.stop();
    }
    assert.deepEqual(await media(), [{ status: 'stored', transcript: 'Mijn laptop start niet op, wat nu?' }]);
    const replies = twilioApi.messages.filter((msg) => msg.to === `whatsapp:${from}`);
    assert.equal(replies.length, 1, 'exactly one reply');
    const prompt = llm.chatRequests().at(-1)!.body.messages.at(-1);
    assert.equal(prompt.content, '[voice note] Mijn laptop start niet op, wat nu?');
  });
}

for (const moment of ['download', 'transcription'] as const) {
  test(`a voice note whose last attempt timed out in its ${moment} stays pending, and an admin's retry answers it`, async () => {
    const sid = `ME${(moment === 'download' ? '3' : '4').repeat(32)}`;
    const from = moment === 'download' ? '+31611110003' : '+31611110004';
    twilioApi.media.set(sid, { bytes: OGG, contentType: 'audio/ogg', hang: moment === 'download' });
    if (moment === 'transcription') llm.failNext({ kind: 'hang' }, { endpoint: 'transcription' });
    const params = inboundParams('', from, { NumMedia: '1', MediaUrl0: twilioApi.mediaUrl(sid), MediaContentType0: 'audio/ogg' });
    assert.equal((await injectSigned(m.app, WHATSAPP, params)).statusCode, 200);
    const row = await t.db.query<{ job_id: string; message_id: string }>(
      `select j.id as job_id, m.id as message_id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
      [params.MessageSid],
    );
    const { job_id: jobId, message_id: messageId } = row.rows[0]!;
    const media = async () => (await t.db.query<{ status: string; transcript: string | null; note: string | null }>('select status, transcript, note from message_media where message_id = $1', [messageId])).rows;
    // Its last attempt, with a job time-out that passes while Twilio holds the file (or the
    // transcriber the voice note).
    await t.db.query('update ai_jobs set max_attempts = 1 where id = $1', [jobId]);
    const { runtime } = m;
    const worker = new Worker({ db: runtime.db, handlers: runtime.handlers, logger: runtime.logger, pollIntervalMs: 100, jobTimeoutMs: 1000, shutdownGraceMs: 5000 });
    await worker.start();
    try {
      await waitFor(async () => (await jobGet(t.db, jobId))?.status === 'failed', `the last attempt to time out in the ${moment}`, 20_000);
    } finally {
      // Until its handler has returned: what it records after the abort is recorded by now.
      await worker.stop();
    }
    // Our own time-out says nothing about the file: it was never given up on.
    assert.deepEqual(await media(), [{ status: 'pending', transcript: null, note: null }]);

    // Twilio serves it again; the admin retries the failed job, and the reply hears it.
    twilioApi.media.set(sid, { bytes: OGG, contentType: 'audio/ogg' });
    assert.ok(await jobRetry(t.db, jobId));
    const next = await m.startWorker();
    try {
      await waitFor(async () => (await jobGet(t.db, jobId))?.status === 'done', 'the retried job to finish', 30_000);
    } finally {
      await next.stop();
    }
    assert.deepEqual(await media(), [{ status: 'stored', transcript: 'Mijn laptop start niet op, wat nu?', note: null }]);
    assert.equal(llm.chatRequests().at(-1)!.body.messages.at(-1).content, '[voice note] Mijn laptop start niet op, wat nu?');
  });
}
