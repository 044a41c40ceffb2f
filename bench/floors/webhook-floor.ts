// The floors under the webhook benchmark (issue #18): the least an HTTP app on this machine
// can do for the same signed form posts, spawned and loaded exactly as `aiq serve` is
// (bench/webhook.ts). Two modes, the first argument:
//   insert  fastify 5 + @fastify/formbody, one INSERT of (MessageSid, From, Body) per request
//           through a pg Pool of aiq serve's default size (DATABASE_POOL_SIZE, 10), then
//           200 with empty TwiML once it has committed: the cost of "store the message" alone.
//   none    the same app answering 200 without touching the database: the HTTP ceiling of
//           this machine with the load generator on it.
// No signature check, no validation, no logging: whatever aiq spends beyond these is its own.
// Environment: PORT, HOST (127.0.0.1), WEBHOOK_PATH, and for `insert` DATABASE_URL (an empty
// database: the table is created at start) and DATABASE_POOL_SIZE (10). GET /readyz answers
// once it listens. Prints nothing; exits 0 on SIGTERM or SIGINT.
import formbody from '@fastify/formbody';
import Fastify from 'fastify';
import pg from 'pg';
import { listenUntilStopped } from '../lib/standalone-app.ts';

const mode = process.argv[2];
if (mode !== 'insert' && mode !== 'none') {
  console.error('usage: webhook-floor.ts insert|none');
  process.exit(2);
}

// bench/webhook.ts counts the stored rows in it (the loss check).
const FLOOR_TABLE = 'floor_messages';

const pool =
  mode === 'insert'
    ? new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_SIZE ?? 10), keepAlive: true })
    : undefined;
// An idle client losing its server would otherwise end the process with an unhandled 'error'.
pool?.on('error', () => {});
await pool?.query(`create table if not exists ${FLOOR_TABLE} (
  message_sid text primary key,
  from_number text not null,
  body        text not null,
  created_at  timestamptz not null default now()
)`);

const app = Fastify({ logger: false });
await app.register(formbody);
app.get('/readyz', async () => 'ok');
app.post(process.env.WEBHOOK_PATH ?? '/webhooks/twilio/whatsapp', async (request, reply) => {
  const form = (request.body ?? {}) as Record<string, string | undefined>;
  if (pool) {
    // Autocommit: the promise resolves after the commit, so the 200 follows it as in aiq.
    await pool.query(`insert into ${FLOOR_TABLE} (message_sid, from_number, body) values ($1, $2, $3)`, [
      form.MessageSid,
      form.From,
      form.Body ?? '',
    ]);
  }
  return reply.status(200).type('text/xml').send('<Response/>');
});

await listenUntilStopped(app, async () => {
  await pool?.end();
});
