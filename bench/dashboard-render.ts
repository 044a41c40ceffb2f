// Measures how long the dashboard's overview and job list take to render with 1,000,000
// jobs in a PostgreSQL server table (inserted with generate_series). Prints, never asserts:
// `node --import tsx bench/dashboard-render.ts [rows]`.
import { performance } from 'node:perf_hooks';
import { freshServerDatabase } from '../test/helpers/db.ts';
import { startAdminApp, TEST_ADMIN_TOKEN } from '../test/helpers/admin-app.ts';

const rows = Number(process.argv[2] ?? 1_000_000);

// A month of history: mostly done, some failed and cancelled, a few pending; four types.
// Finished rows get attempted_at/finished_at a few hundred ms apart, like real runs.
const FILL_SQL = `
  insert into ai_jobs (type, payload, status, attempts, max_attempts, next_run_at, last_error,
                       created_at, updated_at, attempted_at, finished_at, errors)
  select (array['autoreply', 'suggest', 'embed_record', 'import_people'])[1 + g % 4],
         jsonb_build_object('messageId', md5(g::text), 'conversationId', g % 5000),
         s.status,
         case when s.status = 'pending' then 0 else 1 end,
         3,
         c.created_at,
         case when s.status = 'failed' then 'LLM unreachable: connect ECONNREFUSED ' || g end,
         c.created_at, c.created_at,
         case when s.status <> 'pending' then c.created_at end,
         case when s.status <> 'pending' then c.created_at + make_interval(secs => 0.2 + (g % 50) / 10.0) end,
         case when s.status = 'failed' then '[{"attempt":1,"error":"boom"}]'::jsonb else '[]'::jsonb end
  from generate_series(1, $1::int) g
  cross join lateral (select now() - make_interval(secs => (g::float8 / $1::int) * 30 * 86400) as created_at) c
  cross join lateral (select case when g % 100 < 90 then 'done' when g % 100 < 95 then 'failed'
                                  when g % 100 < 98 then 'cancelled' else 'pending' end as status) s`;

async function time(label: string, run: () => Promise<{ statusCode: number }>): Promise<void> {
  const samples: number[] = [];
  for (let i = 0; i < 12; i++) {
    const start = performance.now();
    const response = await run();
    if (response.statusCode !== 200) throw new Error(`${label}: HTTP ${response.statusCode}`);
    samples.push(performance.now() - start);
  }
  samples.splice(0, 2); // warm-up
  samples.sort((a, b) => a - b);
  const median = samples[Math.floor(samples.length / 2)]!;
  console.log(`${label.padEnd(44)} median ${median.toFixed(1).padStart(7)} ms   max ${samples.at(-1)!.toFixed(1).padStart(7)} ms`);
}

const database = await freshServerDatabase();
try {
  const start = performance.now();
  await database.db.query(FILL_SQL, [rows]);
  // What autovacuum does after a bulk insert; it also sets the visibility map that lets the
  // type × status count be an index-only scan.
  await database.db.query('vacuum analyze ai_jobs');
  console.log(`inserted ${rows.toLocaleString('en')} jobs in ${((performance.now() - start) / 1000).toFixed(1)} s`);
  const t = await startAdminApp({}, database);
  const headers = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
  const login = await t.app.inject({ method: 'POST', url: '/admin/login', payload: { token: TEST_ADMIN_TOKEN } });
  const cookie = String(login.headers['set-cookie']).split(';')[0]!;
  const get = (url: string) => () => t.app.inject({ url, headers: { cookie } });
  await time('GET /admin (overview)', get('/admin'));
  await time('GET /admin/jobs (newest 50)', get('/admin/jobs'));
  await time('GET /admin/jobs?status=failed', get('/admin/jobs?status=failed'));
  await time('GET /admin/jobs?type=suggest', get('/admin/jobs?type=suggest'));
  await time('GET /admin/jobs?status=failed&type=suggest', get('/admin/jobs?status=failed&type=suggest'));
  const page = await t.app.inject({ url: '/api/jobs?limit=50', headers });
  let cursor = page.json().nextCursor as string;
  for (let i = 0; i < 200; i++) cursor = (await t.app.inject({ url: `/api/jobs?limit=50&after=${cursor}`, headers })).json().nextCursor;
  await time('GET /admin/jobs (page 202, keyset)', get(`/admin/jobs?after=${cursor}`));
  await time('GET /admin/jobs?q=ECONNREFUSED 999 (text)', get('/admin/jobs?q=ECONNREFUSED%20999'));
  await time('GET /admin/jobs/retry-failed (count)', get('/admin/jobs/retry-failed'));
  await time('GET /api/stats', () => t.app.inject({ url: '/api/stats', headers }));
  await t.close();
} finally {
  await database.close();
}
