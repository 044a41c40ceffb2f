// The chaos run: real `aiq serve` and `aiq worker` processes on the PostgreSQL server, fake
// Twilio and OpenAI servers that fail on purpose, workers killed with SIGKILL every few
// seconds and PostgreSQL restarted once — then a check that every acknowledged message got
// exactly one reply or a visible failure, and that nothing was sent twice.
//
//   npm run chaos -- [--messages 1000] [--conversations 200] [--rate 25] [--kill-every-ms 3000]
//                    [--workers 3] [--no-restart-postgres] [--keep-database]
//                    [--pooler-url postgres://…:6432/postgres]   (aiq through PgBouncer, polling)
//                    [--serves 2]        (serve processes behind a loopback round-robin proxy)
//                    [--rolling-restart] (restart workers one by one with SIGTERM instead of
//                                         killing them: a deploy; every stop must be clean)
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect, type Server } from 'node:net';
import { parseArgs, promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import twilio from 'twilio';
import { freePort, seededRandom } from '../test/helpers/fake-http.ts';
import { startFakeOpenAi } from '../test/helpers/fake-openai.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio } from '../test/helpers/fake-twilio.ts';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '1000' },
    conversations: { type: 'string', default: '200' },
    rate: { type: 'string', default: '25' },
    'kill-every-ms': { type: 'string', default: '3000' },
    workers: { type: 'string', default: '3' },
    'restart-postgres': { type: 'boolean', default: true },
    'no-restart-postgres': { type: 'boolean', default: false },
    'keep-database': { type: 'boolean', default: false },
    // aiq's processes reach the database through this pooler (transaction mode), with no
    // direct URL: they migrate through it and their workers poll. Checks stay direct.
    'pooler-url': { type: 'string' },
    serves: { type: 'string', default: '1' },
    'rolling-restart': { type: 'boolean', default: false },
    'settle-timeout-s': { type: 'string', default: '300' },
    seed: { type: 'string', default: '7' },
    // The timings a deployment runs with (60 s leases, 5 s backoff base …) instead of the
    // shortened ones that let a run settle in about a minute.
    'production-timings': { type: 'boolean', default: false },
    // Small, so that the bursts (3 messages) are longer than the prompt's window.
    'history-messages': { type: 'string', default: '2' },
  },
});

const MESSAGES = Number(args.messages);
const CONVERSATIONS = Number(args.conversations);
const RATE = Number(args.rate);
const KILL_EVERY_MS = Number(args['kill-every-ms']);
const WORKERS = Number(args.workers);
const SERVES = Number(args.serves);
const ROLLING = args['rolling-restart'];
const RESTART_POSTGRES = args['restart-postgres'] && !args['no-restart-postgres'];
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DATABASE = `aiq_chaos_${process.pid}`;
const DATABASE_URL = Object.assign(new URL(ADMIN_URL), { pathname: `/${DATABASE}` }).toString();
const APP_DATABASE_URL = args['pooler-url'] ? Object.assign(new URL(args['pooler-url']), { pathname: `/${DATABASE}` }).toString() : DATABASE_URL;
const FROM_NUMBER = 'whatsapp:+14155238886';
// Short leases and backoff let a run settle in a minute or two; the mechanisms are the same.
// --production-timings runs with the defaults a deployment has (src/config.ts).
const TIMINGS = args['production-timings']
  ? { JOB_LEASE_SECONDS: '60', BACKOFF_BASE_SECONDS: '5', BACKOFF_CAP_SECONDS: '300', REPLY_CONFIRM_TIMEOUT_SECONDS: '300', AI_REQUEST_TIMEOUT_MS: '30000' }
  : { JOB_LEASE_SECONDS: '4', BACKOFF_BASE_SECONDS: '0.5', BACKOFF_CAP_SECONDS: '5', REPLY_CONFIRM_TIMEOUT_SECONDS: '15', AI_REQUEST_TIMEOUT_MS: '1500' };

/** The run's dice, so a failing run can be replayed with --seed. */
const random = seededRandom(Number(args.seed));

const log = (msg: string) => console.log(`[chaos ${new Date().toISOString().slice(11, 23)}] ${msg}`);
const execFileAsync = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));


async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

// ---- the system under test -------------------------------------------------------------

// Every user message any successful chat request carried: "acknowledged ⇒ read by the model
// or visibly failed" is checked against it (the fake keeps only its last 100 requests).
const prompted = new Set<string>();
const fakeOpenAi = await startFakeOpenAi({
  seed: Number(args.seed),
  latencyMs: 20,
  recordLimit: 100,
  randomFaults: [
    { probability: 0.2, fault: { kind: 'status', status: 429, headers: { 'retry-after-ms': '500' }, message: 'Rate limit reached' } },
    { probability: 0.1, fault: { kind: 'status', status: 500, message: 'The server had an error' } },
    { probability: 0.05, fault: { kind: 'hang' } },
  ],
  reply: (body, n) => {
    for (const message of body.messages as Array<{ role: string; content: string }>) if (message.role === 'user') prompted.add(message.content);
    return `Answer ${n} from the assistant.`;
  },
});
const fakeTwilio = await startFakeTwilio({ seed: Number(args.seed), statusCallbacks: true, rates: { serverError: 0.1 } });

await adminQuery(`drop database if exists ${DATABASE} with (force)`);
await adminQuery(`create database ${DATABASE}`);
const port = await freePort();
const publicUrl = `http://127.0.0.1:${port}`;
const env: NodeJS.ProcessEnv = {
  ...process.env,
  NODE_ENV: 'production',
  LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'error',
  DATABASE_URL: APP_DATABASE_URL,
  HOST: '127.0.0.1',
  PORT: String(port),
  PUBLIC_URL: publicUrl,
  ADMIN_TOKEN: 'chaos-admin-token-0123456789',
  TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID,
  TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN,
  TWILIO_WHATSAPP_FROM: FROM_NUMBER,
  TWILIO_API_BASE_URL: fakeTwilio.url,
  AI_PROVIDER: 'openai',
  OPENAI_API_KEY: 'sk-chaos',
  OPENAI_BASE_URL: fakeOpenAi.openaiBaseUrl,
  ...TIMINGS,
  HISTORY_MESSAGES: args['history-messages'],
  WORKER_CONCURRENCY: '20',
  WORKER_POLL_INTERVAL_MS: '500',
};

interface Proc {
  name: string;
  child: ChildProcess;
  startedAt: number;
  output: string;
  /** Set when we kill it; any other exit is a crash, and a broken invariant. */
  expectedExit: boolean;
}

/** Processes that exited without being killed: a crash (PostgreSQL restart, say). */
const crashes: string[] = [];

// Every aiq process this run started: when the run ends, however it ends (a test runner
// stopping it on a time-out, Ctrl-C), none is left behind holding connections and CPU.
const spawned = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of spawned) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

function startAiq(role: 'serve' | 'worker', name: string, servePort?: number): Proc {
  const child = spawn(process.execPath, ['bin/aiq.js', role], { env: servePort ? { ...env, PORT: String(servePort) } : env, stdio: ['ignore', 'pipe', 'pipe'] });
  spawned.add(child);
  child.once('exit', () => spawned.delete(child));
  const proc: Proc = { name, child, output: '', expectedExit: false, startedAt: Date.now() };
  const keep = (chunk: Buffer) => {
    proc.output = (proc.output + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.once('exit', (code, signal) => {
    if (!proc.expectedExit) crashes.push(`${name} exited by itself (${code ?? signal}): ${proc.output.slice(-1500)}`);
  });
  return proc;
}

async function waitForHttp(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await sleep(100);
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

// Migrate once up front, so that serve and the workers start against a ready schema.
execFileSync(process.execPath, ['bin/aiq.js', 'migrate'], { env, stdio: 'ignore' });
// With several serve processes, each listens on a port of its own and a round-robin TCP
// proxy on the public port spreads connections over them, as a load balancer would.
const servePorts = SERVES > 1 ? await Promise.all(Array.from({ length: SERVES }, () => freePort())) : [port];
const serves: Proc[] = servePorts.map((p, i) => startAiq('serve', SERVES > 1 ? `serve-${i + 1}` : 'serve', p));
for (const p of servePorts) await waitForHttp(`http://127.0.0.1:${p}/readyz`, 30_000);
let proxy: Server | undefined;
if (SERVES > 1) {
  let next = 0;
  proxy = createServer((client) => {
    const upstream = connect(servePorts[next++ % servePorts.length]!, '127.0.0.1');
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => proxy!.listen(port, '127.0.0.1', resolve));
}
await waitForHttp(`${publicUrl}/readyz`, 30_000);
const workers: Proc[] = Array.from({ length: WORKERS }, (_, i) => startAiq('worker', `worker-${i + 1}`));
log(`${SERVES} serve on ${publicUrl}${SERVES > 1 ? ' (round-robin proxy)' : ''}, ${WORKERS} workers${ROLLING ? ' (rolling restarts)' : ''}, database ${DATABASE}${args["pooler-url"] ? " through the pooler (workers poll)" : ""}; fake OpenAI ${fakeOpenAi.url}, fake Twilio ${fakeTwilio.url}`);

// ---- the traffic -----------------------------------------------------------------------

interface Sent {
  params: Record<string, string>;
}
const sent: Sent[] = [];
const acknowledged = new Set<string>();
let webhookRetries = 0;
let neverAcknowledged = 0;
let lastWebhookFailure = '';
let redeliveries = 0;

function newMessage(conversation: number, n: number): Record<string, string> {
  const number = `+3161${String(conversation).padStart(7, '0')}`;
  return {
    MessageSid: `SM${randomBytes(16).toString('hex')}`,
    AccountSid: FAKE_ACCOUNT_SID,
    From: `whatsapp:${number}`,
    To: FROM_NUMBER,
    Body: `Question ${n} from conversation ${conversation}: when is the office open?`,
    NumMedia: '0',
    ProfileName: `Colleague ${conversation}`,
    WaId: number.slice(1),
  };
}

/** Posts a signed webhook as Twilio does, retrying (as Twilio does) until it is acknowledged. */
async function deliver(params: Record<string, string>): Promise<void> {
  const url = `${publicUrl}/webhooks/twilio/whatsapp`;
  const signature = twilio.getExpectedTwilioSignature(FAKE_AUTH_TOKEN, url, params);
  for (let attempt = 0; attempt < 60; attempt++) {
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
        body: new URLSearchParams(params).toString(),
        signal: AbortSignal.timeout(5000),
      });
      await response.text();
      if (response.status === 200) {
        acknowledged.add(params.MessageSid!);
        return;
      }
      if (response.status < 500) throw new Error(`webhook refused ${params.MessageSid} with ${response.status}`);
      lastWebhookFailure = `HTTP ${response.status}`;
    } catch (err) {
      if ((err as Error).message.startsWith('webhook refused')) throw err;
      lastWebhookFailure = (err as Error).message;
    }
    webhookRetries++;
    await sleep(250);
  }
  // Twilio gives up too, eventually: the message was never accepted, which the checks report.
  neverAcknowledged++;
}

const inFlight = new Set<Promise<void>>();
function send(params: Record<string, string>): void {
  const delivery = deliver(params).finally(() => inFlight.delete(delivery));
  inFlight.add(delivery);
}

// ---- the chaos -------------------------------------------------------------------------

let kills = 0;
let rollingRestarts = 0;
/** Workers that did not stop cleanly (exit code 0) on SIGTERM during a rolling restart. */
const uncleanStops: string[] = [];
let postgresRestarts = 0;
let sending = true;
// A deploy: each worker in turn gets SIGTERM, finishes or releases its jobs and exits 0,
// and its replacement starts; the others keep working meanwhile.
const rolling = async () => {
  // Until traffic ends, and at least once through every worker (a busy machine stops
  // workers slowly, and a deploy restarts them all).
  const more = () => sending || rollingRestarts < workers.length;
  for (let index = 0; more(); index = (index + 1) % workers.length) {
    await sleep(KILL_EVERY_MS * (0.5 + random()));
    if (!more()) break;
    const old = workers[index]!;
    // A deploy moves on once the new instance is up: a process is not stopped in its
    // first second, before it could even take the signal (Node's default would kill it).
    await sleep(Math.max(0, old.startedAt + 1000 - Date.now()));
    old.expectedExit = true;
    const exited = new Promise<number | string>((resolve) => old.child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
    old.child.kill('SIGTERM');
    const code = await exited;
    if (code !== 0) uncleanStops.push(`${old.name} exited with ${code} on SIGTERM: ${old.output.slice(-500)}`);
    workers[index] = startAiq('worker', `${old.name}'`);
    rollingRestarts++;
  }
};
const killer = ROLLING ? rolling() : (async () => {
  while (sending) {
    await sleep(KILL_EVERY_MS * (0.5 + random()));
    if (!sending) break;
    const index = Math.floor(random() * workers.length);
    const victim = workers[index]!;
    victim.expectedExit = true;
    victim.child.kill('SIGKILL');
    kills++;
    workers[index] = startAiq('worker', `${victim.name}'`);
  }
})();

const started = Date.now();
let count = 0;
const restartAt = Math.floor(MESSAGES / 2);
let restarting: Promise<void> = Promise.resolve();
while (count < MESSAGES) {
  if (RESTART_POSTGRES && postgresRestarts === 0 && count >= restartAt) {
    // In the background: traffic keeps coming while the server is down, as it would.
    log('restarting PostgreSQL (pg_ctlcluster 15 main restart)');
    postgresRestarts++;
    restarting = execFileAsync('pg_ctlcluster', ['15', 'main', 'restart']).then(() => log('PostgreSQL is back'));
  }
  const roll = random();
  if (roll < 0.05 && sent.length > 0) {
    // Twilio redelivers a message it thinks we did not get: same MessageSid, same signature.
    send(sent[Math.floor(random() * sent.length)]!.params);
    redeliveries++;
  } else {
    const conversation = Math.floor(random() * CONVERSATIONS);
    // One in ten is a burst: three messages within a few milliseconds.
    const burst = roll < 0.15 ? 3 : 1;
    for (let b = 0; b < burst && count < MESSAGES; b++) {
      const params = newMessage(conversation, count++);
      sent.push({ params });
      send(params);
    }
  }
  await sleep(1000 / RATE);
}
await restarting;
await Promise.all(inFlight);
sending = false;
await killer;
const sentFor = (Date.now() - started) / 1000;
log(`sent ${count} messages (+${redeliveries} redeliveries) in ${sentFor.toFixed(1)} s; ${kills} workers killed; ${postgresRestarts} PostgreSQL restart(s)`);

// ---- settle ----------------------------------------------------------------------------

const db = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
db.on('error', () => {});
const settleStarted = Date.now();
const settleDeadline = settleStarted + Number(args['settle-timeout-s']) * 1000;
let open = -1;
while (Date.now() < settleDeadline) {
  const { rows } = await db.query<{ open: number }>(`select count(*)::int as open from ai_jobs where status in ('pending', 'processing')`);
  open = rows[0]!.open;
  if (open === 0) break;
  await sleep(500);
}
const settleSeconds = (Date.now() - settleStarted) / 1000;
log(open === 0 ? `settled in ${settleSeconds.toFixed(1)} s` : `NOT settled after ${settleSeconds.toFixed(0)} s: ${open} jobs open`);

for (const proc of [...workers, ...serves]) {
  proc.expectedExit = true;
  proc.child.kill('SIGTERM');
}
proxy?.close();
await Promise.all([...workers, ...serves].map((p) => new Promise((resolve) => (p.child.exitCode !== null ? resolve(null) : p.child.once('exit', resolve)))));
// Callbacks still in flight at stop would find serve gone; that is fine, sends are counted.

// ---- the checks ------------------------------------------------------------------------

const one = async <T>(sql: string, values: unknown[] = []): Promise<T> => (await db.query(sql, values)).rows[0] as T;
const sids = [...acknowledged];
const stored = await one<{ stored: number; distinct_sids: number }>(
  `select count(*)::int as stored, count(distinct twilio_sid)::int as distinct_sids
   from messages where source = 'inbound' and twilio_sid = any($1::text[])`,
  [sids],
);
const jobsPerMessage = await one<{ without_job: number; with_many: number; done: number; failed: number; failed_without_reason: number }>(
  `with per_message as (
     select m.id,
            count(j.id) as jobs,
            bool_or(j.status = 'done') as done,
            bool_or(j.status = 'failed') as failed,
            bool_or(j.status = 'failed' and coalesce(j.last_error, '') = '') as failed_without_reason
     from messages m
     left join ai_jobs j on j.type = 'autoreply' and j.payload->>'messageId' = m.id::text
     where m.source = 'inbound'
     group by m.id)
   select count(*) filter (where jobs = 0)::int as without_job,
          count(*) filter (where jobs > 1)::int as with_many,
          count(*) filter (where done)::int as done,
          count(*) filter (where failed)::int as failed,
          count(*) filter (where failed_without_reason)::int as failed_without_reason
   from per_message`,
);
const replies = await one<{ replies: number; doubled: number; confirmed: number; flagged: number; refused: number }>(
  `select count(*)::int as replies,
          (select count(*)::int from (select reply_to_message_id from messages where source = 'ai'
             group by reply_to_message_id having count(*) > 1) d) as doubled,
          count(*) filter (where twilio_sid is not null)::int as confirmed,
          count(*) filter (where status = 'flagged')::int as flagged,
          count(*) filter (where status in ('failed', 'undelivered'))::int as refused
   from messages where source = 'ai'`,
);
// A message is answered when a reply of its conversation covered its position (the reply's
// context_until_seq): one reply may answer a burst. Otherwise its job must have failed visibly.
const perMessage = await db.query<{ body: string; answered: boolean; failed: boolean }>(
  `select m.body,
          exists (select 1 from messages r
                  where r.conversation_id = m.conversation_id and r.source <> 'inbound'
                    and r.status not in ('failed', 'send_failed') and r.context_until_seq >= m.seq) as answered,
          exists (select 1 from ai_jobs j
                  where j.type = 'autoreply' and j.payload->>'messageId' = m.id::text and j.status = 'failed') as failed
   from messages m where m.source = 'inbound'`,
);
const unanswered = {
  lost: perMessage.rows.filter((m) => !m.answered && !m.failed).length,
  answered: perMessage.rows.filter((m) => m.answered).length,
  // Marked answered although no prompt the model answered contained it.
  answeredUnread: perMessage.rows.filter((m) => m.answered && !prompted.has(m.body)).length,
  // Acknowledged, never read by the model, and no failure to show for it.
  neverRead: perMessage.rows.filter((m) => !prompted.has(m.body) && !m.failed).length,
};
const jobs = await one<{ processing: number; failed: number; history_incomplete: number; reclaims: number; retries: number }>(
  `select count(*) filter (where status = 'processing')::int as processing,
          count(*) filter (where status = 'failed')::int as failed,
          count(*) filter (where status = 'failed' and (
            select count(*) from jsonb_array_elements(errors) e where not coalesce((e->>'refunded')::boolean, false)
          ) <> attempts)::int as history_incomplete,
          coalesce(sum((select count(*) from jsonb_array_elements(errors) e where e->>'error' like 'lease expired%')), 0)::int as reclaims,
          coalesce(sum(jsonb_array_length(errors)), 0)::int as retries
   from ai_jobs`,
);
// Twilio's side: every reply is known by the message id in its status callback URL.
const twilioStats = fakeTwilio.stats();
const duplicateSends = twilioStats.duplicates.length;

const report = {
  seed: Number(args.seed),
  timings: Object.entries(TIMINGS).map(([name, value]) => `${name}=${value}`).join(' '),
  historyMessages: Number(args['history-messages']),
  messages: count,
  redeliveries,
  acknowledged: acknowledged.size,
  neverAcknowledged,
  processCrashes: crashes.length,
  webhookRetries,
  servers: SERVES,
  workers: WORKERS,
  workersKilled: kills,
  rollingRestarts,
  postgresRestarts,
  sentSeconds: Number(sentFor.toFixed(1)),
  settleSeconds: Number(settleSeconds.toFixed(1)),
  stored: stored.stored,
  answered: unanswered.answered,
  answeredUnread: unanswered.answeredUnread,
  neverRead: unanswered.neverRead,
  jobsDone: jobsPerMessage.done,
  jobsFailed: jobsPerMessage.failed,
  replies: replies.replies,
  repliesConfirmed: replies.confirmed,
  repliesFlagged: replies.flagged,
  repliesRefusedByTwilio: replies.refused,
  twilioSendsAccepted: twilioStats.accepted,
  leaseReclaims: jobs.reclaims,
  failedAttempts: jobs.retries,
  duplicates: replies.doubled + duplicateSends + (stored.stored - stored.distinct_sids),
  lost: unanswered.lost + (acknowledged.size - stored.distinct_sids) + jobsPerMessage.without_job,
};

const violations: string[] = [];
for (const crash of crashes) violations.push(crash);
for (const stop of uncleanStops) violations.push(stop);
if (neverAcknowledged > 0) violations.push(`${neverAcknowledged} messages were never acknowledged by the webhook in 15 s of retries (last: ${lastWebhookFailure})`);
if (open !== 0) violations.push(`${open} jobs still pending or processing after the settle time-out`);
if (stored.distinct_sids !== acknowledged.size) violations.push(`${acknowledged.size - stored.distinct_sids} acknowledged messages are not stored`);
if (stored.stored !== stored.distinct_sids) violations.push('an inbound message is stored twice');
if (jobsPerMessage.without_job > 0) violations.push(`${jobsPerMessage.without_job} inbound messages have no autoreply job`);
if (jobsPerMessage.with_many > 0) violations.push(`${jobsPerMessage.with_many} inbound messages have more than one autoreply job`);
if (jobsPerMessage.failed_without_reason > 0) violations.push(`${jobsPerMessage.failed_without_reason} failed jobs have no last_error`);
if (replies.doubled > 0) violations.push(`${replies.doubled} inbound messages have two AI replies`);
if (duplicateSends > 0) violations.push(`the fake Twilio API received ${duplicateSends} duplicate sends of one reply`);
if (jobs.processing > 0) violations.push(`${jobs.processing} jobs left processing`);
if (jobs.history_incomplete > 0) violations.push(`${jobs.history_incomplete} failed jobs lack a history entry per attempt`);
if (unanswered.lost > 0) violations.push(`${unanswered.lost} messages were neither answered nor visibly failed`);
if (unanswered.answeredUnread > 0) violations.push(`${unanswered.answeredUnread} messages count as answered but were in no prompt`);
if (unanswered.neverRead > 0) violations.push(`${unanswered.neverRead} acknowledged messages were in no prompt and did not fail visibly`);

console.log('\nchaos report');
for (const [key, value] of Object.entries(report)) console.log(`  ${key.padEnd(24)} ${value}`);
console.log(violations.length === 0 ? '\nall invariants hold' : `\nINVARIANTS BROKEN:\n  ${violations.join('\n  ')}`);
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/chaos-latest.json', JSON.stringify({ ...report, violations, at: new Date().toISOString() }, null, 2));

await db.end();
await fakeOpenAi.close();
await fakeTwilio.close();
if (violations.length === 0 && !args['keep-database']) await adminQuery(`drop database if exists ${DATABASE} with (force)`);
else log(`database kept for inspection: ${DATABASE_URL}`);
if (violations.length > 0) {
  for (const proc of [...serves, ...workers]) console.error(`--- last output of ${proc.name} ---\n${proc.output.slice(-3000)}`);
}
process.exit(violations.length === 0 ? 0 : 1);
