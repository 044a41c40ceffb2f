// Losing the database connection in the middle of a job (pg_terminate_backend on every
// connection of the worker) must not lose the job: it completes once the pool reconnects.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import net from 'node:net';
import pg from 'pg';
import { openPostgres } from '../src/db/postgres.ts';
import { createLogger } from '../src/logger.ts';
import { jobEnqueue, jobGet, Worker } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';

let t: TestDatabase;
before(async () => {
  t = await freshServerDatabase();
});
after(() => t.close());

async function terminateWorkerConnections(url: string): Promise<number> {
  const killer = new pg.Client({ connectionString: url });
  await killer.connect();
  try {
    const result = await killer.query(
      `select pg_terminate_backend(pid) from pg_stat_activity
       where datname = current_database() and application_name like 'aiq-worker-under-test%'`,
    );
    return result.rowCount ?? 0;
  } finally {
    await killer.end();
  }
}

test('a job whose worker loses every database connection mid-run still completes, once', async () => {
  const db = openPostgres({ connectionString: t.url!, applicationName: 'aiq-worker-under-test', onError: () => {} });
  let runs = 0;
  let killed = 0;
  const worker = new Worker({
    db,
    logger: createLogger('silent'),
    pollIntervalMs: 200,
    handlers: [
      {
        type: 'fragile',
        schema: { safeParse: (input: unknown) => ({ success: true as const, data: input }) },
        async run() {
          runs++;
          if (runs === 1) killed = await terminateWorkerConnections(t.url!);
          return { runs };
        },
      },
    ],
  });
  await worker.start();
  try {
    const id = await jobEnqueue(t.db, { type: 'fragile', payload: {} });
    await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', 'job done after the connections came back', 20_000);
    assert.ok(killed >= 2, `terminated the pool and the LISTEN connection (${killed})`);
    assert.equal(runs, 1, 'the completed work was recorded, not redone');
    // The LISTEN connection came back too: a new job is picked up without the poll.
    const second = await jobEnqueue(t.db, { type: 'fragile', payload: {} });
    await waitFor(async () => (await jobGet(t.db, second))!.status === 'done', 'second job done', 20_000);
  } finally {
    await worker.stop();
    await db.close();
  }
});

/** A TCP forwarder to the real server that can go away and come back on the same port, as a pooler restarting does. */
async function restartableProxy(databaseUrl: string) {
  const target = new URL(databaseUrl);
  const sockets = new Set<net.Socket>();
  const serve = () =>
    net.createServer((downstream) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      for (const socket of [downstream, upstream]) {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
        socket.on('error', () => {});
      }
      downstream.pipe(upstream).pipe(downstream);
      upstream.on('close', () => downstream.destroy());
      downstream.on('close', () => upstream.destroy());
    });
  let server = serve();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const url = Object.assign(new URL(databaseUrl), { host: `127.0.0.1:${port}` }).toString();
  return {
    url,
    down() {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
    async up() {
      server = serve();
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    },
    close() {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}

test('a failure that PostgreSQL cannot take during a two-second outage is recorded when it is back, not left to the lease', async () => {
  const proxy = await restartableProxy(t.url!);
  const db = openPostgres({ connectionString: proxy.url, onError: () => {} });
  let runs = 0;
  const worker = new Worker({
    db,
    logger: createLogger('silent'),
    pollIntervalMs: 200,
    leaseSeconds: 60,
    backoff: { baseSeconds: 0.1, capSeconds: 0.1 },
    handlers: [
      {
        type: 'outage',
        schema: { safeParse: (input: unknown) => ({ success: true as const, data: input }) },
        async run() {
          runs++;
          if (runs > 1) return { runs };
          // The pooler goes away while the job fails, and comes back two seconds later.
          proxy.down();
          setTimeout(() => void proxy.up(), 2000);
          throw new Error('the LLM call failed');
        },
      },
    ],
  });
  await worker.start();
  try {
    const id = await jobEnqueue(t.db, { type: 'outage', payload: {} });
    // Left to its lease, the job would stay processing for 60 s.
    await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', 'the job retried and done soon after the outage', 15_000);
    const job = (await jobGet(t.db, id))!;
    assert.deepEqual(job.errors.map((e) => e.error), ['the LLM call failed'], 'the failure recorded, not a lease expiry');
    assert.equal(runs, 2);
  } finally {
    await worker.stop();
    await db.close();
    proxy.close();
  }
});
