// Behind a transaction-mode pooler (PgBouncer, Supabase's pooler …) every statement may run
// on another server session, so nothing may rely on session state. The source is checked for
// it here; CI also runs the queue, webhook and pipeline suites through PgBouncer
// (TEST_POOLER_URL), and the tests below that need a pooler run there.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pg from 'pg';
import { poolerProbe, seesOurSocket } from '../src/db/pooler.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { NotificationsUnavailableError } from '../src/db/types.ts';
import { createLogger } from '../src/logger.ts';
import { jobEnqueueMany, jobStats, Worker } from '../src/queue/index.ts';
import { freshServerDatabase, POOLER_SOCKET_DIR, POOLER_URL } from './helpers/db.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

/** Session state a transaction-mode pooler loses between statements, and how it looks in our SQL. */
const SESSION_STATE: Array<[string, RegExp]> = [
  ['a session advisory lock (use pg_advisory_xact_lock)', /pg_(try_)?advisory_lock(_shared)?\s*\(/i],
  // A setting's name is lower case with an underscore or a dot (statement_timeout, aiq.x),
  // or role; `set ADMIN_TOKEN to …` in a hint is not SQL.
  ['a session-wide setting (use set local or set_config(…, true))', /(^|[`'";(])\s*[sS][eE][tT]\s+([sS][eE][sS][sS][iI][oO][nN]\s+)?(?!local\b)([a-z]+[_.][a-z_.]+|role)\s*(=|[tT][oO]\b)/],
  ['a session-wide set_config (pass true: transaction-local)', /set_config\s*\([^)]*,\s*false\s*\)/i],
  ['a temporary table', /create\s+(global\s+|local\s+)?temp(orary)?\s+table/i],
  ['a named prepared statement', /\bprepare\s+[a-z_]+\s+(\(|as\b)|\bname\s*:\s*['"`][^'"`]+['"`]\s*,\s*text\s*:/i],
  ['LISTEN outside the database layer', /[`'"]\s*listen\s/i],
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|sql)$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

test('no statement relies on session state a transaction-mode pooler would lose', () => {
  const files = [...sourceFiles(join(ROOT, 'src')), ...sourceFiles(join(ROOT, 'migrations'))];
  assert.ok(files.length > 50);
  const found: string[] = [];
  for (const file of files) {
    // The database layer owns LISTEN (on a direct connection) and PGlite's own session.
    if (file.includes('/src/db/')) continue;
    const text = readFileSync(file, 'utf8');
    for (const [what, pattern] of SESSION_STATE) if (pattern.test(text)) found.push(`${file.slice(ROOT.length)}: ${what}`);
  }
  assert.deepEqual(found, []);
  // The patterns do catch what they are for.
  const caught = (sql: string) => SESSION_STATE.filter(([, p]) => p.test(sql)).map(([what]) => what);
  assert.equal(caught('select pg_advisory_lock(1)').length, 1);
  assert.equal(caught('select pg_advisory_xact_lock(1)').length, 0);
  assert.equal(caught("`set statement_timeout = '5s'`").length, 1);
  assert.equal(caught("`set local statement_timeout = '5s'`").length, 0);
  assert.equal(caught('`update ai_jobs set status = $1`').length, 0);
  assert.equal(caught('update messages m\nset seq = 1;\nset search_path = x').length, 1);
  assert.equal(caught("select set_config('x', 'y', false)").length, 1);
  assert.equal(caught('create temp table t (n int)').length, 1);
  assert.equal(caught("db.query({ name: 'claim', text: 'select 1' })").length, 1);
  assert.equal(caught('`listen aiq_jobs`').length, 1);
});

test('the probe tells a direct connection from a transaction-mode pooler', { skip: !POOLER_URL && 'needs TEST_POOLER_URL (CI starts PgBouncer)' }, async () => {
  const t = await freshServerDatabase();
  try {
    assert.equal((await poolerProbe(t.directUrl!)).mode, 'direct');
    assert.equal((await poolerProbe(t.url!)).mode, 'transaction');
    assert.equal((await poolerProbe(t.directUrl!)).direct, true);
    assert.equal((await poolerProbe(t.url!)).direct, false);
  } finally {
    await t.close();
  }
});

test('over the server\'s own Unix socket the probe sees the server itself', async () => {
  const t = await freshServerDatabase();
  try {
    const server = new pg.Client({ connectionString: t.directUrl });
    await server.connect();
    const [dir] = (await server.query<{ dirs: string }>(`select current_setting('unix_socket_directories') as dirs`)).rows[0]!.dirs.split(',');
    const port = (await server.query<{ port: string }>(`select current_setting('port') as port`)).rows[0]!.port;
    await server.end();
    const url = new URL(t.directUrl!);
    const probe = await poolerProbe(`postgres://${url.username}@/${url.pathname.slice(1)}?host=${encodeURIComponent(dir!.trim())}&port=${port}`);
    assert.deepEqual([probe.mode, probe.direct], ['direct', true]);
  } finally {
    await t.close();
  }
});

test('direct over TCP needs our address, our port and the port we dialled, each (a pooler on the same host can match the rest)', () => {
  const ours = { address: '127.0.0.1', port: 40_001, dialledPort: 5432 };
  const server = { client_addr: '127.0.0.1', client_port: 40_001, server_port: 5432 };
  assert.equal(seesOurSocket(ours, server), true);
  assert.equal(seesOurSocket({ ...ours, address: '::ffff:127.0.0.1' }, server), true, 'an IPv4 client of a dual-stack socket');
  // The CI flake: PgBouncer on 127.0.0.1:6432, its connection to the server on our port number.
  assert.equal(seesOurSocket({ ...ours, dialledPort: 6432 }, server), false);
  assert.equal(seesOurSocket(ours, { ...server, client_addr: '10.0.0.7' }), false);
  assert.equal(seesOurSocket(ours, { ...server, client_port: 40_002 }), false);
  assert.equal(seesOurSocket(ours, { ...server, client_addr: null, client_port: null }), false);
});

test('a proxy whose own connection to the server has the same port number as ours to it is not taken for the server', async (context) => {
  // Seen once in CI: PgBouncer's connection to PostgreSQL had, by chance, the ephemeral port
  // of the probe's connection to PgBouncer, and the probe said "direct". Here a TCP proxy on
  // ::1 makes that chance certain: it connects to the server from 127.0.0.1 with the port its
  // client has on ::1 (the two address families do not share ports).
  const t = await freshServerDatabase();
  const upstream = new URL(t.directUrl!);
  const proxy = createServer((client) => {
    const server = connect({ host: upstream.hostname, port: Number(upstream.port || 5432), localAddress: '127.0.0.1', localPort: client.remotePort });
    server.on('error', () => client.destroy());
    client.on('error', () => server.destroy());
    client.pipe(server).pipe(client);
  });
  try {
    const listening = await new Promise<boolean>((resolve) => {
      proxy.once('error', () => resolve(false));
      proxy.listen(0, '::1', () => resolve(true));
    });
    if (!listening) return context.skip('no IPv6 loopback here');
    const proxied = `postgres://${upstream.username}@[::1]:${(proxy.address() as AddressInfo).port}${upstream.pathname}`;
    // The proxy's outgoing port is taken on 127.0.0.1 now and then (a busy machine; CI once):
    // then it cannot connect and drops our connection. A new try gets another port.
    const retried = async <T>(attempt: () => Promise<T>): Promise<T> => {
      for (let tries = 1; ; tries++) {
        try {
          return await attempt();
        } catch (err) {
          if (tries >= 5 || !/terminated unexpectedly|ECONNRESET/.test(String(err))) throw err;
        }
      }
    };
    await retried(async () => {
      const seen = new pg.Client({ connectionString: proxied });
      seen.on('error', () => {});
      try {
        await seen.connect();
        const { client_port } = (await seen.query<{ client_port: number }>('select inet_client_port() as client_port')).rows[0]!;
        assert.equal(client_port, (seen.connection.stream as Socket).localPort, 'the server sees our port number: the case under test');
      } finally {
        await seen.end().catch(() => {});
      }
    });
    // One TCP connection per client: sessions persist, as behind a session-mode pooler.
    const probe = await retried(() => poolerProbe(proxied));
    assert.deepEqual([probe.mode, probe.direct], ['session', false]);
  } finally {
    proxy.close();
    await t.close();
  }
});

test('while other clients keep the pooler busy, the probe still sees transaction mode, over TCP and over its Unix socket', { skip: !POOLER_URL && 'needs TEST_POOLER_URL (CI starts PgBouncer)' }, async () => {
  // The probe asked whether two sessions got the same server process, which holds only
  // when the pooler hands back the one just released: with other clients' statements in
  // between it said "session" (LISTEN through the pooler, every notification lost) and,
  // over the Unix socket, "direct" (named prepared statements: 26000 … does not exist).
  const t = await freshServerDatabase();
  const busy = await Promise.all(Array.from({ length: 4 }, async () => {
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    return client;
  }));
  let stop = false;
  const traffic = Promise.all(busy.map(async (client) => {
    while (!stop) await client.query('select pg_sleep(0.002)');
  }));
  try {
    const url = new URL(t.url!);
    const urls = [t.url!];
    if (POOLER_SOCKET_DIR) urls.push(`postgres://${url.username}@/${url.pathname.slice(1)}?host=${encodeURIComponent(POOLER_SOCKET_DIR)}&port=${url.port}`);
    for (const each of urls) {
      for (let i = 0; i < 10; i++) {
        const probe = await poolerProbe(each);
        assert.deepEqual([probe.mode, probe.direct], ['transaction', false], `probe ${i + 1} of ${each}`);
      }
    }
  } finally {
    stop = true;
    await traffic;
    await Promise.all(busy.map((client) => client.end()));
    await t.close();
  }
});

test('behind a transaction-mode pooler without a direct URL, a worker polls and still drains', { skip: !POOLER_URL && 'needs TEST_POOLER_URL (CI starts PgBouncer)' }, async () => {
  const t = await freshServerDatabase();
  const pooled = openPostgres({ connectionString: t.url!, poolSize: 5 });
  const lines: string[] = [];
  const logger = createLogger('info', 'json', new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) }));
  const worker = new Worker({
    db: pooled,
    logger,
    pollIntervalMs: 100,
    concurrency: 5,
    handlers: [{ type: 'noop', schema: { safeParse: (input: unknown) => ({ success: true as const, data: input }) }, run: async () => ({ ok: true }) }],
  });
  try {
    await assert.rejects(pooled.listen('anything', () => {}), NotificationsUnavailableError);
    await worker.start();
    assert.match(lines.join(''), /transaction-mode pooler and DATABASE_DIRECT_URL is not set.*polling every 100 ms/);
    await jobEnqueueMany(pooled, Array.from({ length: 200 }, (_, i) => ({ type: 'noop', payload: { i } })));
    await waitFor(async () => (await jobStats(pooled)).totals.done === 200, 'all 200 jobs done by polling', 30_000, 100);
  } finally {
    await worker.stop();
    await pooled.close();
    await t.close();
  }
});

test('behind a transaction-mode pooler, statements are not prepared (auto), and forced on they heal themselves', { skip: !POOLER_URL && 'needs TEST_POOLER_URL (CI starts PgBouncer)' }, async () => {
  const t = await freshServerDatabase();
  const auto = openPostgres({ connectionString: t.url!, poolSize: 5 });
  const forced = openPostgres({ connectionString: t.url!, poolSize: 5, preparedStatements: 'on' });
  const load = (db: typeof auto, transactions = true) =>
    Promise.all(
      Array.from({ length: 10 }, async (_, lane) => {
        for (let i = 0; i < 30; i++) {
          const { rows } = await db.query<{ n: number }>('select $1::int + $2::int as n', [lane, i]);
          assert.equal(rows[0]!.n, lane + i);
          if (!transactions) continue;
          const inTx = await db.transaction((tx) => tx.query<{ n: number }>('select $1::int * 2 as n', [i]));
          assert.equal(inTx.rows[0]!.n, i * 2);
        }
      }),
    );
  try {
    await load(auto);
    // Give 'auto' time to ask, then load again: none of the server sessions holds a statement.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await load(auto);
    for (let i = 0; i < 10; i++) {
      const { rows } = await auto.query<{ prepared: number }>('select count(*)::int as prepared from pg_prepared_statements');
      assert.equal(rows[0]!.prepared, 0);
    }
    // Told to prepare (PgBouncer 1.21+ would keep them): PgBouncer 1.18 mixes them between
    // server sessions; a statement that meets that runs again unnamed, and naming stops.
    // (A transaction that meets it first fails once, as the README says of `on`.)
    await load(forced, false);
    await load(forced);
  } finally {
    await auto.close();
    await forced.close();
    await t.close();
  }
});
