// `aiq simulate` as a user runs it: a real child process posting to a listening aiq, signed
// with the auth token, or with the development secret when there is none.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { DEV_SECRET_FILE } from '../src/messaging/twilio.ts';
import { freshServerDatabase } from './helpers/db.ts';
import { messagingEnv, startMessagingApp } from './helpers/messaging.ts';
import { freePort } from './helpers/fake-http.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

function simulate(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    // Only what the test names: the developer's own TWILIO_* or .env must not leak in.
    const child = spawn(process.execPath, ['bin/aiq.js', 'simulate', ...args], { cwd: ROOT, env: { PATH: process.env.PATH!, ...env } });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

test('aiq simulate posts a webhook the server accepts and stores, with the auth token or the development secret', async () => {
  const t = await freshServerDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-sim-'));
  const withToken = messagingEnv(t.url, 'http://127.0.0.1:9');
  const m = await startMessagingApp(withToken, { listen: true });
  // No Twilio credentials at all: both sides use the secret in DATA_DIR.
  const { TWILIO_ACCOUNT_SID: _a, TWILIO_AUTH_TOKEN: _b, TWILIO_WHATSAPP_FROM: _c, TWILIO_API_BASE_URL: _d, ...bare } = withToken;
  const dev = await startMessagingApp({ ...bare, DATA_DIR: dataDir }, { listen: true });
  try {
    const sent = await simulate(['Hoe laat begint de vergadering?', '--from', '+31612345678', '--url', m.url, '--name', 'Anna'], withToken);
    assert.equal(sent.code, 0, sent.out);
    assert.match(sent.out, /200 <Response\/>/);

    const devSent = await simulate(['Zonder Twilio', '--from', '+31687654321', '--url', dev.url], { ...bare, DATA_DIR: dataDir });
    assert.equal(devSent.code, 0, devSent.out);
    assert.equal(statSync(join(dataDir, DEV_SECRET_FILE)).mode & 0o777, 0o600, 'the development secret is private');

    const stored = (await t.db.query<{ body: string; number: string; name: string }>(`
      select m.body, k.whatsapp_number as number, k.profile_name as name from messages m
      join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id order by m.created_at`)).rows;
    assert.deepEqual(stored.map((r) => [r.body, r.number]), [['Hoe laat begint de vergadering?', '+31612345678'], ['Zonder Twilio', '+31687654321']]);
    assert.equal(stored[0]!.name, 'Anna');
    // No sender configured: simulate writes to Twilio's sandbox number, which is then the
    // default sender, as the dashboard's Simulate stores it: one thread, not two.
    const devThread = await t.db.query(`select c.business_number from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = '+31687654321'`);
    assert.deepEqual(devThread.rows, [{ business_number: null }]);
    assert.equal((await t.db.query(`select 1 from ai_jobs where type = 'autoreply'`)).rowCount, 2);

    // Signed with another secret: the server refuses, and simulate says why.
    const otherDir = mkdtempSync(join(tmpdir(), 'aiq-sim-other-'));
    const refused = await simulate(['nope', '--from', '+31612345678', '--url', dev.url], { ...bare, DATA_DIR: otherDir });
    rmSync(otherDir, { recursive: true, force: true });
    assert.equal(refused.code, 1);
    assert.match(refused.out, /403/);

    const usage = await simulate(['x', '--from', '0612345678', '--url', m.url], withToken);
    assert.equal(usage.code, 2);
    assert.match(usage.out, /--from must be a phone number in E\.164 form/);
    // A text larger than the webhook takes: the hint is about text, not a file (found by a
    // new-user probe).
    const huge = await simulate(['x'.repeat(70_000), '--from', '+31612345678', '--url', m.url], withToken);
    assert.equal(huge.code, 1);
    assert.match(huge.out, /413/);
    assert.match(huge.out, /the text is more than the webhook takes \(WEBHOOK_BODY_LIMIT_BYTES, now \d+ bytes\); a WhatsApp message holds at most 4,096 characters/);
    assert.equal((await t.db.query('select 1 from messages')).rowCount, 2);
  } finally {
    await dev.close();
    await m.close();
    await t.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('aiq simulate --media sends a voice note inside the webhook; --to another business number; offline, the answer says it cannot listen', async () => {
  const t = await freshServerDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-sim-media-'));
  const env: Record<string, string> = { ...messagingEnv(t.url, 'http://127.0.0.1:9'), DATA_DIR: dataDir };
  const { TWILIO_ACCOUNT_SID: _a, TWILIO_AUTH_TOKEN: _b, TWILIO_WHATSAPP_FROM: _c, TWILIO_API_BASE_URL: _d, ...bare } = env;
  const m = await startMessagingApp(bare, { listen: true });
  await m.startWorker();
  const voice = join(dataDir, 'voice.ogg');
  writeFileSync(voice, Buffer.concat([Buffer.from('OggS'), Buffer.alloc(500, 9)]));
  try {
    const sent = await simulate(['--media', voice, '--from', '+31612345678', '--to', '+3197010000002', '--url', m.url], bare);
    assert.equal(sent.code, 0, sent.out);
    await waitFor(async () => (await t.db.query(`select 1 from messages where source = 'ai'`)).rowCount === 1, 'the reply');
    const media = await t.db.query<{ status: string; size: number; note: string }>('select status, size, note from message_media');
    assert.deepEqual(media.rows, [{ status: 'stored', size: 504, note: 'the offline provider cannot transcribe voice notes' }]);
    const reply = await t.db.query<{ body: string; business_number: string }>(
      `select m.body, c.business_number from messages m join conversations c on c.id = m.conversation_id where m.source = 'ai'`,
    );
    assert.match(reply.rows[0]!.body, /I cannot listen to voice notes or look at images offline/);
    assert.equal(reply.rows[0]!.business_number, '+3197010000002');

    const wrong = await simulate(['--media', join(dataDir, 'notes.pdf'), '--from', '+31612345678', '--url', m.url], bare);
    assert.equal(wrong.code, 2);
    assert.match(wrong.out, /--media takes \.ogg/);
  } finally {
    await m.close();
    await t.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('aiq simulate reads the address a running aiq start wrote only while that aiq holds the folder: a file a killed one left is not trusted', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-sim-stale-'));
  // Whatever listens where the killed aiq did: it must get no signed webhook.
  const stray = createServer((request, response) => {
    strayRequests += 1;
    response.end('<Response/>');
  });
  let strayRequests = 0;
  await new Promise<void>((resolve) => stray.listen(0, '127.0.0.1', resolve));
  const { port } = stray.address() as AddressInfo;
  writeFileSync(join(dataDir, 'aiq.address'), `http://127.0.0.1:${port}`);
  writeFileSync(join(dataDir, 'aiq.lock'), '999999999 0b5c0d2a-0000-4000-8000-000000000000 -\n');
  try {
    const closed = String(await freePort());
    const sent = await simulate(['hello', '--from', '+31612345678'], { DATA_DIR: dataDir, PORT: closed });
    assert.equal(sent.code, 1, sent.out);
    assert.match(sent.out, new RegExp(`could not reach http://127\\.0\\.0\\.1:${closed}/`));
    assert.equal(strayRequests, 0);
  } finally {
    stray.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
