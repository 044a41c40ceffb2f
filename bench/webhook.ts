// Webhook acknowledgement under load (issue #4): the real `aiq serve` in its own process on
// the server PostgreSQL, signature checking on, driven by autocannon over loopback with
// signed, unique Twilio posts. Reports req/s and latency, and checks that every
// acknowledged MessageSid is stored with its autoreply job (zero lost messages).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { migrate } from '../src/db/migrate.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { createDatabase, dropDatabase, withDatabase } from './lib/database.ts';
import { freePort } from '../test/helpers/fake-http.ts';
import { waitReady } from './lib/serve-ready.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const AUTH_TOKEN = 'bench-auth-token-0123456789abcdef';
const ACCOUNT_SID = `AC${'0'.repeat(32)}`;

/** True when issue #4's webhook is in the tree; the benchmark is skipped otherwise. */
export function webhookAvailable(): boolean {
  return ['src/http/webhooks.ts', 'src/messaging/twilio.ts', 'bin/aiq.js'].every((f) => existsSync(`${ROOT}${f}`));
}



export interface WebhookFigures {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  acknowledged: number;
  non2xx: number;
  errors: number;
  lost: number;
}

/** One measured run on a fresh database. `connections` concurrent keep-alive clients. */
export async function webhookRun(durationSeconds: number, connections = 10): Promise<WebhookFigures> {
  const { name, url } = await createDatabase();
  let server: ChildProcess | undefined;
  try {
    const db = openPostgres({ connectionString: url, poolSize: 1 });
    await migrate(db);
    await db.close();
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    server = spawn(process.execPath, ['bin/aiq.js', 'serve'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        NODE_ENV: 'production',
        LOG_LEVEL: 'warn',
        DATABASE_URL: url,
        HOST: '127.0.0.1',
        PORT: String(port),
        PUBLIC_URL: base,
        // Sending is configured but never used: `serve` runs no worker.
        TWILIO_ACCOUNT_SID: ACCOUNT_SID,
        TWILIO_AUTH_TOKEN: AUTH_TOKEN,
        TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886',
        ADMIN_TOKEN: 'bench-admin-token-0123456789',
      },
    });
    await waitReady(base, server, 60_000);

    const { signatureOf, WHATSAPP_WEBHOOK_PATH } = await import('../src/messaging/twilio.ts');
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
    // Every 2xx is a promise to Twilio that the message is stored with its job.
    const stored = await withDatabase(url, async (client) =>
      (
        await client.query<{ n: number }>(
          `select count(distinct m.id)::int as n
           from unnest($1::text[]) as acked(sid)
           join messages m on m.twilio_sid = acked.sid and m.source = 'inbound'
           join ai_jobs j on j.type = 'autoreply' and j.payload->>'messageId' = m.id::text`,
          [acknowledgedSids],
        )
      ).rows[0]!.n,
    );
    const acknowledged = acknowledgedSids.length;
    return {
      requestsPerSecond: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      acknowledged,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
      lost: Math.max(0, acknowledged - stored),
    };
  } finally {
    server?.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    if (server && server.exitCode === null) server.kill('SIGKILL');
    await dropDatabase(name).catch(() => {});
  }
}
