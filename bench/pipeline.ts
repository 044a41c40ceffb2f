// The whole pipeline end to end (issue #5): `aiq serve` and `aiq worker` as separate
// processes on the server PostgreSQL, signed webhooks in, replies out to a fake Twilio API,
// answers from a fake OpenAI server. Overhead: one message at a time with an instant LLM,
// webhook sent → reply received by Twilio. Throughput: many messages with a 2 s LLM at
// WORKER_CONCURRENCY=200, where concurrency, not CPU, should be the bound. The same runs
// drive the hand-written script a user would write instead (bench/peers/hand-written-script.ts)
// with the same fakes and the same concurrency: what aiq's guarantees cost, measured.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { migrate } from '../src/db/migrate.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { createDatabase, dropDatabase } from './lib/database.ts';
import { PREFILL, prefillMessages } from './lib/prefill.ts';
import { nowMs, percentile } from './lib/stats.ts';
import { freePort } from '../test/helpers/fake-http.ts';
import { startTsProcess } from '../test/helpers/processes.ts';
import { waitReady } from './lib/serve-ready.ts';
import { aiqProcessEnv, cpuProfileArgs } from './lib/aiq-process.ts';
import { CpuUsage } from './lib/cpu-usage.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const FROM_NUMBER = 'whatsapp:+14155238886';

/** True when issue #5's pipeline and both fakes are in the tree. */
export function pipelineAvailable(): boolean {
  return ['test/helpers/fake-openai.ts', 'test/helpers/fake-twilio.ts', 'src/jobs/autoreply.ts', 'src/http/webhooks.ts'].every((f) =>
    existsSync(`${ROOT}${f}`),
  );
}



export interface PipelineOptions {
  /** What answers the webhooks and replies: aiq's serve and worker (default), or the script. */
  system?: 'aiq' | 'script';
  messages: number;
  /** Chat completion latency of the fake LLM. */
  llmMs: number;
  workerConcurrency: number;
  /** Webhooks in flight at once (1: one message at a time, for overhead). */
  senders: number;
  /**
   * Stored messages in the database before the run (bench/lib/prefill.ts), and the messages
   * come from the prefilled contacts: each conversation has history to read.
   */
  prefill?: number;
}

export interface PipelineFigures extends Partial<JobTimings> {
  p50: number;
  p99: number;
  messagesPerSecond: number;
  delivered: number;
  lost: number;
  /** PostgreSQL commits in the run's database per delivered message, everything included (aiq). */
  commitsPerMessage?: number;
  /**
   * CPU milliseconds per delivered message (Linux; absent elsewhere): aiq's two processes
   * (the script's one is its worker), every PostgreSQL process, and what stands in
   * for the outside world on the same machine (this process, sending the webhooks and
   * hosting the fake Twilio, and the fake OpenAI).
   */
  cpuWorker?: number;
  cpuServe?: number;
  cpuPostgres?: number;
  cpuHarness?: number;
  /** All of that CPU time over the run's duration: how many of the machine's cores it kept busy. */
  coresBusy?: number;
}

/**
 * Where a slot's time goes besides the LLM's latency, from the timestamps aiq stores
 * (averages, ms). `before`: from the claim to the reply's text, less the LLM's latency
 * (waiting in the worker's buffer, reading the conversation, embedding the question,
 * searching, the chat call's own HTTP, and waiting for the CPU meanwhile). `after`: from
 * writing the reply to recording Twilio's answer (the outbox's two statements and the send).
 * The first `concurrency` jobs claimed are apart: they start while the rest of the burst is
 * still arriving, and share the cores with its webhooks.
 */
export interface JobTimings {
  firstWaveBefore: number;
  firstWaveAfter: number;
  laterBefore: number;
  laterAfter: number;
}

// The jobs claimed since the measured burst began, in claim order, with their reply (its
// first part). No status callbacks reach the fake Twilio here, so status_updated_at is the
// moment the send's outcome was written.
const JOB_TIMINGS_SQL = `
  with measured as (
    select j.attempted_at, r.created_at as written_at, r.status_updated_at as recorded_at,
           row_number() over (order by j.attempted_at, j.seq) as position
    from ai_jobs j
    join messages r on r.reply_to_message_id = (j.payload->>'messageId')::uuid and r.source = 'ai' and r.part = 1
    where j.type = 'autoreply' and j.attempted_at >= $1
  )
  select position <= $2 as first_wave,
         (avg(extract(epoch from written_at - attempted_at) * 1000) - $3)::float8 as before_ms,
         avg(extract(epoch from recorded_at - written_at) * 1000)::float8 as after_ms
  from measured
  group by 1`;

async function jobTimings(url: string, since: Date, concurrency: number, llmMs: number): Promise<JobTimings> {
  const db = openPostgres({ connectionString: url, poolSize: 1 });
  try {
    const { rows } = await db.query<{ first_wave: boolean; before_ms: number; after_ms: number }>(JOB_TIMINGS_SQL, [since, concurrency, llmMs]);
    const first = rows.find((r) => r.first_wave);
    const later = rows.find((r) => !r.first_wave);
    if (!first || !later) throw new Error(`job timings: expected jobs both in and after the first ${concurrency}`);
    return { firstWaveBefore: first.before_ms, firstWaveAfter: first.after_ms, laterBefore: later.before_ms, laterAfter: later.after_ms };
  } finally {
    await db.close();
  }
}

async function commitCount(url: string): Promise<number> {
  const db = openPostgres({ connectionString: url, poolSize: 1 });
  try {
    // Backends flush their statistics at most once a second.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const { rows } = await db.query<{ commits: number }>('select xact_commit as commits from pg_stat_database where datname = current_database()');
    return rows[0]!.commits;
  } finally {
    await db.close();
  }
}

export async function pipelineRun(options: PipelineOptions): Promise<PipelineFigures> {
  const { startFakeTwilio, FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN } = await import('../test/helpers/fake-twilio.ts');
  const { signatureOf, WHATSAPP_WEBHOOK_PATH } = await import('../src/messaging/twilio.ts');
  const system = options.system ?? 'aiq';
  if (system === 'script' && options.prefill) throw new Error('the script stores nothing: a prefilled database means nothing to it');
  const database = system === 'aiq' ? await createDatabase() : undefined;
  // The fake OpenAI in a process of its own, as the real API answers from elsewhere: in the
  // benchmark's process its answers waited behind the load generator's event loop, which is
  // busiest exactly when the first jobs embed their questions. Only chat completions take
  // llmMs; embeddings answer at once, as a real embedding call is fast next to a completion.
  const aiPort = await freePort();
  const fakeAi = await startTsProcess('test/helpers/fake-openai.ts', { FAKE_OPENAI_PORT: String(aiPort), FAKE_OPENAI_CHAT_LATENCY_MS: String(options.llmMs) }, /listening on/);
  const fakeTwilio = await startFakeTwilio({ authToken: FAKE_AUTH_TOKEN, accountSid: FAKE_ACCOUNT_SID });
  // The processes under test by role: aiq's serve and worker, or the script as the worker.
  const roles: Record<string, ChildProcess> = {};
  // The webhooks go out through node:http on kept-alive connections, not fetch: the load
  // generator shares the machine's two cores with what it measures, and fetch (undici)
  // cost about three times the CPU per request, most of it in the busiest first second.
  const agent = new Agent({ keepAlive: true, maxSockets: options.senders });
  try {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const outside = {
      TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID,
      TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN,
      TWILIO_WHATSAPP_FROM: FROM_NUMBER,
      TWILIO_API_BASE_URL: fakeTwilio.url,
      OPENAI_API_KEY: 'bench-key',
      OPENAI_BASE_URL: `http://127.0.0.1:${aiPort}/v1`,
    };
    if (database) {
      const db = openPostgres({ connectionString: database.url, poolSize: 1 });
      await migrate(db);
      await db.close();
      if (options.prefill) await prefillMessages(database.url, options.prefill);
      const env = aiqProcessEnv(database.url, port, { ...outside, AI_PROVIDER: 'openai', WORKER_CONCURRENCY: String(options.workerConcurrency) });
      for (const role of ['serve', 'worker']) {
        roles[role] = spawn(process.execPath, [...cpuProfileArgs(role), 'bin/aiq.js', role], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
      }
    } else {
      const env = { ...process.env, ...outside, NODE_ENV: 'production', HOST: '127.0.0.1', PORT: String(port), PUBLIC_URL: base, WEBHOOK_PATH: WHATSAPP_WEBHOOK_PATH, SCRIPT_CONCURRENCY: String(options.workerConcurrency) };
      roles.worker = spawn(process.execPath, ['--import', 'tsx', 'bench/peers/hand-written-script.ts'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
    }
    await waitReady(base, (roles.serve ?? roles.worker)!);

    const target = `${base}${WHATSAPP_WEBHOOK_PATH}`;
    // Each message comes from its own sender, so ordering keys never serialise them; on a
    // prefilled database, a contact with history.
    const sender = (i: number) => (options.prefill ? `whatsapp:${PREFILL.numberOf(i % PREFILL.conversations)}` : `whatsapp:+3162${String(i).padStart(7, '0')}`);
    const sentAt = new Map<string, number>();
    const latencies: number[] = [];
    let lastDelivered = 0;
    let wake: () => void = () => {};
    fakeTwilio.on('accepted', (message) => {
      const at = nowMs();
      const sent = sentAt.get(message.to);
      if (sent === undefined) return;
      sentAt.delete(message.to);
      latencies.push(at - sent);
      lastDelivered = at;
      wake();
    });
    const post = async (i: number) => {
      const params: Record<string, string> = {
        MessageSid: `SM${(i + 1).toString(16).padStart(32, '0')}`,
        AccountSid: FAKE_ACCOUNT_SID,
        From: sender(i),
        To: FROM_NUMBER,
        Body: `Hoeveel vakantiedagen heb ik nog? (${i})`,
        NumMedia: '0',
        ProfileName: `Bench ${i}`,
      };
      const body = new URLSearchParams(params).toString();
      const headers = { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body), 'x-twilio-signature': signatureOf(FAKE_AUTH_TOKEN, target, params) };
      sentAt.set(sender(i), nowMs());
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const req = request(target, { method: 'POST', agent, headers }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        });
        req.on('error', reject);
        req.end(body);
      });
      if (status !== 200) throw new Error(`webhook answered ${status}`);
    };
    const waitDelivered = async (count: number, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (latencies.length < count && Date.now() < deadline) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 200);
        });
      }
    };

    const sendAll = async (from: number, count: number) => {
      let next = from;
      await Promise.all(
        Array.from({ length: options.senders }, async () => {
          while (next < from + count) {
            const i = next++;
            const delivered = latencies.length;
            await post(i);
            // One at a time means the next message waits for this reply.
            if (options.senders === 1) await waitDelivered(delivered + 1, 30_000);
          }
        }),
      );
      await waitDelivered(count, 60_000 + options.llmMs * 10);
    };

    // Let the worker finish starting (LISTEN) before the first message.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    // A worker that has been running, as in production: a first round of messages (one per
    // slot, not counted) opens its database and HTTP connections, prepares its statements
    // and lets V8 compile the code paths a reply takes. A cold start is a one-off that a
    // burst straight after start-up would otherwise charge to throughput.
    const warmup = options.senders === 1 ? 10 : options.workerConcurrency;
    await sendAll(options.messages, warmup);
    latencies.length = 0;
    const commitsBefore = database ? await commitCount(database.url) : 0;
    const pids = Object.fromEntries(Object.entries(roles).map(([role, child]) => [role, child.pid!]));
    const cpu = new CpuUsage({ ...pids, fakeOpenAi: fakeAi.process.pid!, harness: process.pid });
    cpu.start();
    const startedAt = new Date();
    const started = nowMs();
    await sendAll(0, options.messages);
    const spent = cpu.stop();
    const commits = database ? (await commitCount(database.url)) - commitsBefore : undefined;
    // Only a burst has a first wave and later ones.
    const timings = database && options.senders > 1 && options.messages > options.workerConcurrency ? await jobTimings(database.url, startedAt, options.workerConcurrency, options.llmMs) : undefined;
    const perMessage = (seconds: number) => (seconds * 1000) / Math.max(1, latencies.length);
    return {
      ...(spent && {
        cpuWorker: perMessage(spent.worker!),
        ...(spent.serve === undefined ? {} : { cpuServe: perMessage(spent.serve) }),
        cpuPostgres: perMessage(spent.postgres!),
        cpuHarness: perMessage(spent.harness! + spent.fakeOpenAi!),
        coresBusy: (Object.values(spent).reduce((sum, seconds) => sum + seconds, 0) * 1000) / (lastDelivered - started),
      }),
      ...(commits === undefined ? {} : { commitsPerMessage: commits / Math.max(1, latencies.length) }),
      // Where a slot's time went besides the LLM (aiq's bursts).
      ...timings,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      messagesPerSecond: (latencies.length / (lastDelivered - started)) * 1000,
      delivered: latencies.length,
      lost: options.messages - latencies.length,
    };
  } finally {
    for (const child of Object.values(roles)) child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const child of Object.values(roles)) if (child.exitCode === null) child.kill('SIGKILL');
    fakeAi.process.kill('SIGKILL');
    agent.destroy();
    await fakeTwilio.close();
    // BENCH_KEEP_DB=1 leaves the database for inspection (its name: aiq_bench_<pid>_<n>).
    if (database && !process.env.BENCH_KEEP_DB) await dropDatabase(database.name).catch(() => {});
  }
}
