// `aiq start` on the embedded database killed with SIGKILL while a reply waits on the LLM, and
// started again: the folder lock proves the old process gone, so its job runs again at once,
// not when its lease runs out (an hour here), and the contact gets exactly one reply.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openPglite } from '../src/db/pglite.ts';
import { jobGet } from '../src/queue/index.ts';
import { seedEmbeddedDataDir } from './helpers/db.ts';
import { freePort } from './helpers/fake-http.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { FROM_NUMBER, inboundParams, signedForm } from './helpers/messaging.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

let openai: FakeOpenAi;
let twilio: FakeTwilio;
let dir: string;
before(async () => {
  openai = await startFakeOpenAi();
  twilio = await startFakeTwilio();
  dir = mkdtempSync(join(tmpdir(), 'aiq-restart-'));
  await seedEmbeddedDataDir(dir);
});
after(async () => {
  await openai.close();
  await twilio.close();
  rmSync(dir, { recursive: true, force: true });
});

function startAiq(port: number, dataDir = dir, overrides: Record<string, string> = {}) {
  const env = {
    PATH: process.env.PATH!,
    DATA_DIR: dataDir,
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
    AI_PROVIDER: 'openai',
    OPENAI_API_KEY: 'sk-test',
    OPENAI_BASE_URL: openai.openaiBaseUrl,
    EMBEDDING_DIMENSIONS: '32',
    TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID,
    TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN,
    TWILIO_WHATSAPP_FROM: FROM_NUMBER,
    TWILIO_API_BASE_URL: twilio.url,
    // Far longer than the test may take: only a restart that knows the job is orphaned runs it.
    JOB_LEASE_SECONDS: '3600',
    ...overrides,
  };
  const child = spawn(process.execPath, ['bin/aiq.js', 'start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (c) => (log += c));
  child.stderr.on('data', (c) => (log += c));
  const exited = new Promise<string | number>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code ?? -1)));
  return { child, exited, log: () => log };
}

test('killed mid-job and started again: the job runs again at once and the contact gets one reply', async () => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const ready = () => waitFor(async () => (await fetch(`${base}/readyz`).then((r) => r.ok, () => false)), 'aiq start to be ready', 60_000, 100);

  // The first chat completion never answers: the job is mid-LLM when the process dies.
  openai.failNext({ kind: 'hang' }, { endpoint: 'chat' });
  const first = startAiq(port);
  try {
    await ready();
    const url = `${base}/webhooks/twilio/whatsapp`;
    const { headers, payload } = signedForm(url, inboundParams('Waar vind ik het rooster?'));
    assert.equal((await fetch(url, { method: 'POST', headers, body: payload })).status, 200);
    await waitFor(() => openai.chatRequests().length === 1, 'the job to wait on the LLM');
    first.child.kill('SIGKILL');
    assert.equal(await first.exited, 'SIGKILL');
  } finally {
    first.child.kill('SIGKILL');
  }
  assert.equal(twilio.sendCount(), 0, 'nothing was sent before the kill');

  const second = startAiq(port);
  try {
    await ready();
    await waitFor(() => twilio.sendCount() === 1, 'the reply, sent by the restarted process', 30_000);
    assert.match(second.log(), /reclaimed a job left processing by a process that is gone/);
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0);
  } finally {
    second.child.kill('SIGKILL');
  }
  assert.equal(openai.chatRequests().length, 2, 'the LLM asked once more, by the retried job');
  assert.equal(twilio.sendCount(), 1, 'one reply');

  const db = await openPglite({ dataDir: dir });
  try {
    const jobId = (await db.query<{ id: string }>(`select id from ai_jobs where type = 'autoreply'`)).rows[0]!.id;
    const job = (await jobGet(db, jobId))!;
    assert.deepEqual([job.status, job.attempts], ['done', 2]);
    assert.match(job.errors[0]!.error, /stopped without finishing: its process is gone/);
    const replies = await db.query<{ n: number }>(`select count(*)::int as n from messages where source = 'ai'`);
    assert.equal(replies.rows[0]!.n, 1);
  } finally {
    await db.close();
  }
});

test('the first start says it is creating the embedded database before the wait for it; a later start does not', async () => {
  // Found by a new-user probe: a first `npm start` printed nothing for 20 s (creating the
  // database), then everything at once; the browser meanwhile got "connection refused".
  const fresh = join(dir, 'fresh');
  const port = await freePort();
  const ready = () => waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)), 'aiq start to be ready', 60_000, 100);
  for (const start of ['first', 'second']) {
    const aiq = startAiq(port, fresh);
    try {
      await ready();
      const lines = aiq.log().split('\n');
      const creating = lines.findIndex((l) => /creating the embedded database in .*fresh \(first start only/.test(l));
      if (start === 'first') {
        assert.ok(creating >= 0, aiq.log());
        assert.ok(creating < lines.findIndex((l) => l.includes('applied migrations')), 'said before the wait, not after it');
      } else assert.equal(creating, -1, aiq.log());
      aiq.child.kill('SIGTERM');
      assert.equal(await aiq.exited, 0);
    } finally {
      aiq.child.kill('SIGKILL');
    }
  }
});

test('a first start before the AI settings, then OPENAI_API_KEY set: an empty knowledge base moves to the new embedding space, and the message is answered', async () => {
  // Found by a new-user probe: `npm start` once (offline), then OPENAI_API_KEY in .env: every
  // reply waited on "embedding space mismatch" (and failed after 15 min) until `aiq reembed
  // --switch`, though no document had been embedded in the old space.
  const folder = join(dir, 'offline-first');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const ready = () => waitFor(async () => (await fetch(`${base}/readyz`).then((r) => r.ok, () => false)), 'aiq start to be ready', 60_000, 100);
  const offline = startAiq(port, folder, { AI_PROVIDER: 'local', OPENAI_API_KEY: '', OPENAI_BASE_URL: '' });
  try {
    await ready();
    offline.child.kill('SIGTERM');
    assert.equal(await offline.exited, 0);
  } finally {
    offline.child.kill('SIGKILL');
  }

  const sendsBefore = twilio.sendCount();
  const online = startAiq(port, folder);
  try {
    await ready();
    assert.doesNotMatch(online.log(), /embedding space mismatch/, online.log());
    assert.match(online.log(), /the knowledge base had no embeddings yet: it now uses openai\/text-embedding-3-small\/32 instead of local\//);
    const url = `${base}/webhooks/twilio/whatsapp`;
    const { headers, payload } = signedForm(url, inboundParams('Hoeveel vakantiedagen heb ik?'));
    assert.equal((await fetch(url, { method: 'POST', headers, body: payload })).status, 200);
    await waitFor(() => twilio.sendCount() === sendsBefore + 1, 'the reply, through the configured provider', 30_000);
    online.child.kill('SIGTERM');
    assert.equal(await online.exited, 0);
  } finally {
    online.child.kill('SIGKILL');
  }
});
