// The server going away in the middle of a transaction (restart, terminated backend) must
// fail that transaction, not crash the process with an unhandled 'error' event.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { openPostgres } from '../src/db/postgres.ts';
import { dyingProxy } from './helpers/dying-proxy.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';

let t: TestDatabase;
before(async () => {
  t = await freshServerDatabase();
});
after(() => t.close());

test('a backend terminated between two statements of a transaction rejects it, and the pool recovers', async () => {
  const db = openPostgres({ connectionString: t.url!, onError: () => {} });
  const killer = new pg.Client({ connectionString: t.url });
  await killer.connect();
  try {
    await assert.rejects(
      db.transaction(async (tx) => {
        const { rows } = await tx.query<{ pid: number }>('select pg_backend_pid() as pid');
        await killer.query('select pg_terminate_backend($1)', [rows[0]!.pid]);
        // Give the socket time to deliver the termination while no query is running.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await tx.query('select 1');
      }),
    );
    const { rows } = await db.query<{ ok: number }>('select 1 as ok');
    assert.equal(rows[0]!.ok, 1, 'the next statement gets a fresh connection');
  } finally {
    await killer.end();
    await db.close();
  }
});

// A fast shutdown can put a query's last reply and the server's FATAL notice in one TCP
// segment. The query's completion hands its connection to the next waiting transaction,
// whose promise resolves only after the parser has read on into the FATAL: for that moment
// the connection belongs to no one, and a connection error with no listener ends the process.
test('a connection that dies while it is handed from a query to a waiting transaction fails that transaction, not the process', async () => {
  const proxy = await dyingProxy(t.url!);
  const db = openPostgres({ connectionString: proxy.url, poolSize: 1, onError: () => {} });
  try {
    const [first, second] = await Promise.allSettled([
      db.query<{ ok: number }>('select 1 as ok'),
      db.transaction((tx) => tx.query('select 2')),
    ]);
    assert.equal(first.status, 'fulfilled', 'the query completed before the connection died');
    assert.equal(second.status, 'rejected', 'the transaction that was handed the dead connection fails');
    const { rows } = await db.transaction((tx) => tx.query<{ ok: number }>('select 3 as ok'));
    assert.equal(rows[0]!.ok, 3, 'the pool opens a fresh connection for the next transaction');
  } finally {
    await db.close();
    proxy.close();
  }
});
