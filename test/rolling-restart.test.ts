// A deploy under load: workers restarted one by one (SIGTERM, a clean exit, a new process)
// while signed webhooks keep arriving, with real `aiq serve` and `aiq worker` processes and
// the fake Twilio and OpenAI. The chaos harness checks every invariant: each acknowledged
// message gets exactly one reply or a visible failure, nothing is sent twice, and every
// stopped worker exited cleanly.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { SERVER_URL } from './helpers/db.ts';
import { ROOT } from './helpers/processes.ts';

test('rolling restart of the workers under load: every acknowledged message gets its one reply', async () => {
  const args = ['--import', 'tsx', 'bench/chaos.ts', '--messages', '200', '--rate', '20', '--kill-every-ms', '1500', '--rolling-restart', '--no-restart-postgres', '--workers', '3', '--seed', '11'];
  const { code, out } = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, BENCH_DATABASE_URL: SERVER_URL } });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    child.on('exit', (code) => resolve({ code, out }));
  });
  assert.equal(code, 0, out);
  assert.match(out, /all invariants hold/);
  const restarts = Number(/rollingRestarts\s+(\d+)/.exec(out)?.[1]);
  assert.ok(restarts >= 3, `every worker was restarted at least once (${restarts} restarts)\n${out}`);
  assert.match(out, /lost\s+0\n/);
  assert.match(out, /duplicates\s+0\n/);
});
