// Logs for people and for machines, as real `aiq start` processes write them: with
// LOG_FORMAT=pretty one readable line per event, with LOG_FORMAT=json JSON lines; in both
// an inbound webhook and a sent reply are one info line each, with ids and a masked phone
// number, never the message text or the full number.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { freePort } from './helpers/fake-http.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

const PHONE = '+31612345678';
const TEXT = 'Mijn geheime vraag over verlof';

async function runOnce(format: 'json' | 'pretty'): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), `aiq-log-${format}-`));
  const port = await freePort();
  const env = { ...process.env, DATA_DIR: dataDir, PORT: String(port), LOG_FORMAT: format, LOG_LEVEL: 'info', AI_PROVIDER: 'local', DATABASE_URL: '', ADMIN_TOKEN: 'the-admin-token-0123456789' };
  const server = spawn(process.execPath, ['bin/aiq.js', 'start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  server.stdout.on('data', (c) => (out += c));
  server.stderr.on('data', () => {});
  try {
    await waitFor(() => out.includes('worker started'), `aiq start (${format}):\n${out}`, 60_000, 100);
    const simulate = spawn(process.execPath, ['bin/aiq.js', 'simulate', TEXT, '--from', PHONE], { cwd: ROOT, env, stdio: 'ignore' });
    assert.equal(await new Promise((resolve) => simulate.on('exit', resolve)), 0);
    await waitFor(() => out.includes('reply done: logged, not sent'), `the reply (${format}):\n${out}`, 30_000, 100);
    // A refused request is logged with its path; its query (here a number to export) is not.
    const refused = await fetch(`http://127.0.0.1:${port}/api/privacy/export?phone=${encodeURIComponent(PHONE)}`, { headers: { authorization: 'Bearer not-the-admin-token-000' } });
    assert.equal(refused.status, 401);
    await waitFor(() => out.includes('wrong bearer token'), `the refusal in the log (${format}):\n${out}`, 10_000, 50);
    return out;
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const eventLines = (out: string) => out.split('\n').filter((line) => /inbound WhatsApp message stored|reply done: logged, not sent/.test(line));

test('the same events as JSON lines and as readable lines, without message text or full numbers', async () => {
  const [json, pretty] = await Promise.all([runOnce('json'), runOnce('pretty')]);

  const jsonEvents = eventLines(json).map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.deepEqual(jsonEvents.map((e) => e.msg), ['inbound WhatsApp message stored', 'reply done: logged, not sent']);
  assert.ok(jsonEvents.every((e) => e.level === 30));
  assert.equal(jsonEvents[0]!.from, '+31•••••••78');
  assert.equal(jsonEvents[1]!.to, '+31•••••••78');
  assert.match(String(jsonEvents[1]!.replyId), /^[0-9a-f-]{36}$/);

  const prettyEvents = eventLines(pretty);
  assert.equal(prettyEvents.length, 2);
  for (const line of prettyEvents) {
    assert.match(line, /^\[\d\d:\d\d:\d\d(\.\d+)?\] INFO.*: (inbound WhatsApp message stored|reply done: logged, not sent) /, line);
    assert.doesNotMatch(line, /^\{/, 'not JSON');
  }
  assert.ok(pretty.split('\n').some((line) => /INFO.*aiq is listening: open http:\/\//.test(line)), 'the dashboard URL is in a readable line');

  // The whole log of the run, every line of it: no message text, no full number.
  for (const line of [...json.split('\n'), ...pretty.split('\n')]) {
    assert.ok(!line.includes(TEXT), `message text in a log line: ${line}`);
    assert.ok(!line.includes(PHONE) && !line.includes(PHONE.slice(1)), `full phone number in a log line: ${line}`);
  }
});
