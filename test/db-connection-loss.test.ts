// The server going away in the middle of a transaction (restart, terminated backend) must
// fail that transaction, not crash the process with an unhandled 'error' event.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import net from 'node:net';
import pg from 'pg';
import { openPostgres } from '../src/db/postgres.ts';
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
  const target = new URL(t.url!);
  let armed = true;
  const proxy = net.createServer((downstream) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    downstream.pipe(upstream);
    const dieAfterFirstQuery = armed;
    armed = false;
    let readyForQuery = 0;
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      if (!dieAfterFirstQuery) return void downstream.write(chunk);
      pending = Buffer.concat([pending, chunk]);
      // Forward whole messages; after the second ReadyForQuery (start-up, then the first
      // query) append the FATAL in the same write and hang up.
      let offset = 0;
      while (pending.length - offset >= 5) {
        const length = pending.readInt32BE(offset + 1);
        if (pending.length - offset < 1 + length) break;
        const type = String.fromCharCode(pending[offset]!);
        offset += 1 + length;
        if (type === 'Z' && ++readyForQuery === 2) {
          downstream.end(Buffer.concat([pending.subarray(0, offset), fatalMessage('57P01', 'terminating connection due to administrator command')]));
          upstream.destroy();
          return;
        }
      }
      downstream.write(pending.subarray(0, offset));
      pending = pending.subarray(offset);
    });
    upstream.on('error', () => downstream.destroy());
    downstream.on('error', () => upstream.destroy());
    upstream.on('close', () => downstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const viaProxy = new URL(t.url!);
  viaProxy.port = String((proxy.address() as net.AddressInfo).port);
  const db = openPostgres({ connectionString: viaProxy.toString(), poolSize: 1, onError: () => {} });
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

function fatalMessage(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`);
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([header, fields]);
}
