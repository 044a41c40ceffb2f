// Webhook acknowledgement under load (issue #4): the real `aiq serve` in its own process on
// the server PostgreSQL, signature checking on, driven by autocannon over loopback with
// signed, unique Twilio posts. Reports req/s and latency, and checks that every
// acknowledged MessageSid is stored with its autoreply job (zero lost messages).
// The same load also runs against the floors under it (issue #18, bench/floors/): a minimal
// fastify app that stores each post with one INSERT, and one that touches no database. And
// aiq again on a database prefilled with stored history (bench/lib/prefill.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { loadConfig } from '../src/config.ts';
import { migrate } from '../src/db/migrate.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { createDatabase, dropDatabase, withDatabase } from './lib/database.ts';
import { freePort } from '../test/helpers/fake-http.ts';
import { waitReady } from './lib/serve-ready.ts';
import { aiqProcessEnv, cpuProfileArgs } from './lib/aiq-process.ts';
import { prefillMessages } from './lib/prefill.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const AUTH_TOKEN = 'bench-auth-token-0123456789abcdef';
const ACCOUNT_SID = `AC${'0'.repeat(32)}`;

/** True when issue #4's webhook is in the tree; the benchmark is skipped otherwise. */
export function webhookAvailable(): boolean {
  return ['src/http/webhooks.ts', 'src/messaging/twilio.ts', 'bin/aiq.js'].every((f) => existsSync(`${ROOT}${f}`));
}


/**
 * What answers the posts: the real `aiq serve`, or one of its floors (bench/floors/webhook-floor.ts):
 * `floor-insert` stores each post with one INSERT, `floor-none` touches no database.
 */
export type WebhookServer = 'aiq' | 'floor-insert' | 'floor-none';

export interface WebhookOptions {
  server?: WebhookServer;
  /** aiq only: stored messages to prefill (prefillMessages) before serve starts. */
  prefillMessages?: number;
}

// The floor's table (created by the floor at start), for the loss check.
const FLOOR_TABLE = 'floor_messages';

export interface WebhookFigures {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  acknowledged: number;
  non2xx: number;
  errors: number;
  lost: number;
  /** With prefillMessages: how long the prefill took (s), outside the measured run. */
  prefillSeconds?: number;
}

/**
 * One measured run: `connections` concurrent keep-alive clients for `durationSeconds`
 * against `options.server` (aiq serve unless told), on a fresh database (the no-database
 * floor gets none).
 */
export async function webhookRun(durationSeconds: number, connections = 10, options: WebhookOptions = {}): Promise<WebhookFigures> {
  const kind = options.server ?? 'aiq';
  const database = kind === 'floor-none' ? undefined : await createDatabase();
  const url = database?.url ?? '';
  let server: ChildProcess | undefined;
  let prefillSeconds: number | undefined;
  try {
    const { signatureOf, WHATSAPP_WEBHOOK_PATH } = await import('../src/messaging/twilio.ts');
    if (kind === 'aiq') {
      const db = openPostgres({ connectionString: url, poolSize: 1 });
      await migrate(db);
      await db.close();
      if (options.prefillMessages) prefillSeconds = (await prefillMessages(url, options.prefillMessages)).ms / 1000;
    }
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const aiqEnv = aiqProcessEnv(url, port, {
      // Sending is configured but never used: `serve` runs no worker.
      TWILIO_ACCOUNT_SID: ACCOUNT_SID,
      TWILIO_AUTH_TOKEN: AUTH_TOKEN,
      TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886',
    });
    server =
      kind === 'aiq'
        ? spawn(process.execPath, [...cpuProfileArgs(), 'bin/aiq.js', 'serve'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'], env: aiqEnv })
        : spawn(process.execPath, ['--import', 'tsx', 'bench/floors/webhook-floor.ts', kind === 'floor-insert' ? 'insert' : 'none'], {
            cwd: ROOT,
            stdio: ['ignore', 'ignore', 'inherit'],
            env: {
              ...process.env,
              NODE_ENV: 'production',
              DATABASE_URL: url,
              HOST: '127.0.0.1',
              PORT: String(port),
              WEBHOOK_PATH: WHATSAPP_WEBHOOK_PATH,
              // The pool aiq serve would open with this environment (DATABASE_POOL_SIZE, 10 by default).
              DATABASE_POOL_SIZE: String(loadConfig(aiqEnv).DATABASE_POOL_SIZE),
            },
          });
    await waitReady(base, server, 60_000);

    const target = `${base}${WHATSAPP_WEBHOOK_PATH}`;
    let counter = 0;
    const acknowledgedSids: string[] = [];
    const result = await autocannon({
      url: target,
      connections,
      duration: durationSeconds,
      requests: [
        {
          method: 'POST',
          // Each request is a new message (a unique MessageSid) from one of 1,000 senders,
          // signed exactly as Twilio signs it.
          setupRequest(request, context) {
            counter += 1;
            const params: Record<string, string> = {
              MessageSid: `SM${counter.toString(16).padStart(32, '0')}`,
              AccountSid: ACCOUNT_SID,
              From: `whatsapp:+3161${String(counter % 1000).padStart(7, '0')}`,
              To: 'whatsapp:+14155238886',
              Body: `benchmark message ${counter}`,
              NumMedia: '0',
              ProfileName: 'Bench',
            };
            context.sid = params.MessageSid;
            return {
              ...request,
              headers: {
                'content-type': 'application/x-www-form-urlencoded',
                'x-twilio-signature': signatureOf(AUTH_TOKEN, target, params),
              },
              body: new URLSearchParams(params).toString(),
            };
          },
          // One request at a time per connection, so the context names this response's SID.
          onResponse(status, _body, context) {
            if (status >= 200 && status < 300) acknowledgedSids.push(context.sid as string);
          },
        },
      ],
    });
    // Every 2xx is a promise to Twilio that the message is stored with its job (aiq), or
    // stored (the INSERT floor). The no-database floor promises nothing: nothing to check.
    const countStored = (sql: string) =>
      withDatabase(url, async (client) => (await client.query<{ n: number }>(sql, [acknowledgedSids])).rows[0]!.n);
    const acknowledged = acknowledgedSids.length;
    const stored =
      kind === 'aiq'
        ? await countStored(
            `select count(distinct m.id)::int as n
             from unnest($1::text[]) as acked(sid)
             join messages m on m.twilio_sid = acked.sid and m.source = 'inbound'
             join ai_jobs j on j.type = 'autoreply' and j.payload->>'messageId' = m.id::text`,
          )
        : kind === 'floor-insert'
          ? await countStored(`select count(*)::int as n from unnest($1::text[]) as acked(sid) join ${FLOOR_TABLE} f on f.message_sid = acked.sid`)
          : acknowledged;
    return {
      requestsPerSecond: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      acknowledged,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
      lost: Math.max(0, acknowledged - stored),
      ...(prefillSeconds === undefined ? {} : { prefillSeconds }),
    };
  } finally {
    server?.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    if (server && server.exitCode === null) server.kill('SIGKILL');
    if (database) await dropDatabase(database.name).catch(() => {});
  }
}
