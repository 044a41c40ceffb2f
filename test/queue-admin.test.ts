// The admin read paths on both databases. The newest-first list over all statuses is merged
// from one index scan per status (and the processing rows from the lease index), so every
// filter is paged with small limits and compared with one plain sort of the rows; counts
// and stats are compared with the rows too.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { JOB_STATUSES, jobCount, jobEnqueueMany, jobList, jobStats, type JobFilter, type JobStatus } from '../src/queue/index.ts';
import { BACKENDS, type TestDatabase } from './helpers/db.ts';

interface Row {
  id: string;
  type: string;
  status: JobStatus;
  createdAt: Date;
  needle: boolean;
}

// Statuses interleaved (13 long, so they do not line up with the 3 types), and every three
// jobs share a created_at, so ties across statuses are broken by id as the cursor is.
const PATTERN: JobStatus[] = ['done', 'processing', 'failed', 'done', 'pending', 'cancelled', 'done', 'failed', 'processing', 'pending', 'done', 'cancelled', 'failed'];
const TYPES = ['a', 'b', 'c'];
const JOBS = 60;
const BASE = Date.parse('2026-01-01T12:00:00.000Z');

// Ids compare as Postgres compares uuids: bytewise, which is lowercase hex text order.
function newestFirst(a: Row, b: Row): number {
  return b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}

async function pagedIds(db: TestDatabase['db'], filter: JobFilter, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let after: string | undefined;
  for (let pages = 0; pages < 200; pages++) {
    const page = await jobList(db, filter, { limit, after });
    ids.push(...page.jobs.map((job) => job.id));
    if (!page.nextCursor) {
      assert.ok(page.jobs.length <= limit);
      return ids;
    }
    assert.equal(page.jobs.length, limit, 'only the last page is short');
    after = page.nextCursor;
  }
  throw new Error('paging did not end');
}

for (const backend of BACKENDS) {
  describe(`admin reads on ${backend.name}`, () => {
    let t: TestDatabase;
    let rows: Row[];
    before(async () => {
      t = await backend.fresh();
      const jobs = Array.from({ length: JOBS }, (_, i) => ({
        type: TYPES[i % TYPES.length]!,
        status: PATTERN[i % PATTERN.length]!,
        createdAt: new Date(BASE - Math.floor(i / 3) * 1000),
        needle: i % 4 === 0,
      }));
      const inserted = await t.db.query<{ id: string; n: number }>(
        `insert into ai_jobs (type, payload, status, attempts, created_at, attempted_at, locked_by, locked_until, finished_at)
         select type, jsonb_build_object('n', n, 'tag', case when needle then 'needle' else 'hay' end), status,
                case when status = 'pending' then 0 else 1 end, created_at,
                case when status <> 'pending' then created_at end,
                case when status = 'processing' then 'w1' end,
                case when status = 'processing' then now() + interval '5 minutes' end,
                case when status in ('done', 'failed', 'cancelled') then created_at + interval '1 second' end
         from unnest($1::text[], $2::text[], $3::timestamptz[], $4::boolean[]) with ordinality as j(type, status, created_at, needle, n)
         returning id, (payload->>'n')::int as n`,
        [jobs.map((j) => j.type), jobs.map((j) => j.status), jobs.map((j) => j.createdAt), jobs.map((j) => j.needle)],
      );
      rows = inserted.rows.map((row) => ({ id: row.id, ...jobs[row.n - 1]! }));
    });
    after(() => t.close());

    const expected = (keep: (row: Row) => boolean) => rows.filter(keep).sort(newestFirst).map((row) => row.id);

    test('all statuses, newest first: the merged pages equal one sorted list, at any page size', async () => {
      const all = expected(() => true);
      const firstTen = new Set(rows.filter((row) => all.slice(0, 10).includes(row.id)).map((row) => row.status));
      assert.equal(firstTen.size, JOB_STATUSES.length, 'the newest ten jobs mix all five statuses');
      for (const limit of [1, 4, 7, 50, 500]) assert.deepEqual(await pagedIds(t.db, {}, limit), all, `limit ${limit}`);
    });

    test('one status, a type, a search and a created range page the same way', async () => {
      const cases: Array<[JobFilter, (row: Row) => boolean]> = [
        ...JOB_STATUSES.map((status): [JobFilter, (row: Row) => boolean] => [{ status }, (row) => row.status === status]),
        [{ type: 'b' }, (row) => row.type === 'b'],
        [{ status: 'failed', type: 'a' }, (row) => row.status === 'failed' && row.type === 'a'],
        [{ status: 'processing', type: 'c' }, (row) => row.status === 'processing' && row.type === 'c'],
        [{ search: 'NEEDLE' }, (row) => row.needle],
        [
          { createdBefore: new Date(BASE - 4000), createdAfter: new Date(BASE - 15000) },
          (row) => row.createdAt.getTime() < BASE - 4000 && row.createdAt.getTime() > BASE - 15000,
        ],
      ];
      for (const [filter, keep] of cases) {
        const want = expected(keep);
        assert.ok(want.length > 0, `${JSON.stringify(filter)} matches some jobs`);
        assert.deepEqual(await pagedIds(t.db, filter, 3), want, JSON.stringify(filter));
      }
    });

    test('counts and stats agree with the rows', async () => {
      for (const [filter, keep] of [
        [{}, () => true],
        [{ status: 'processing' }, (row: Row) => row.status === 'processing'],
        [{ status: 'failed', type: 'a' }, (row: Row) => row.status === 'failed' && row.type === 'a'],
        [{ type: 'b', search: 'needle' }, (row: Row) => row.type === 'b' && row.needle],
      ] as Array<[JobFilter, (row: Row) => boolean]>) {
        assert.equal(await jobCount(t.db, filter), rows.filter(keep).length, JSON.stringify(filter));
      }
      const stats = await jobStats(t.db);
      const counts: Record<string, Partial<Record<JobStatus, number>>> = {};
      const totals: Record<JobStatus, number> = { pending: 0, processing: 0, done: 0, failed: 0, cancelled: 0 };
      for (const row of rows) {
        const byStatus = (counts[row.type] ??= {});
        byStatus[row.status] = (byStatus[row.status] ?? 0) + 1;
        totals[row.status]++;
      }
      assert.deepEqual(stats.counts, counts);
      assert.deepEqual(stats.totals, totals);
    });

    test('jobs enqueued together (one created_at, to the microsecond) page without a gap', async () => {
      // A bulk enqueue stamps every job with the same transaction time; a cursor that kept
      // only milliseconds skipped the rest of the batch after the first page.
      const ids = await jobEnqueueMany(t.db, Array.from({ length: 10 }, (_, n) => ({ type: 'bulk', payload: { n } })));
      try {
        const want = [...ids].sort().reverse();
        assert.deepEqual(await pagedIds(t.db, { type: 'bulk' }, 3), want);
        assert.deepEqual(await pagedIds(t.db, { status: 'pending', type: 'bulk' }, 4), want);
        // The row a cursor points at may be gone by the next page (retention, say).
        const first = await jobList(t.db, { type: 'bulk' }, { limit: 3 });
        await t.db.query('delete from ai_jobs where id = $1', [first.jobs[2]!.id]);
        const rest = await jobList(t.db, { type: 'bulk' }, { limit: 10, after: first.nextCursor! });
        assert.deepEqual(rest.jobs.map((job) => job.id), want.slice(3));
      } finally {
        await t.db.query(`delete from ai_jobs where type = 'bulk'`);
      }
    });
  });
}
