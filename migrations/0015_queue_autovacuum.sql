-- Autovacuum settings for the queue table (README, Operations). Every job is written three
-- times (inserted pending, updated to processing, updated to done or failed), so a busy
-- queue leaves two dead row versions per job, and the claim and completion walk indexes
-- that those versions bloat. The server defaults wait for 20% of the table to be dead
-- before vacuuming: on a table holding a million finished jobs that is 200,000 dead rows,
-- minutes of churn in which every claim steps over them. Queue libraries recommend
-- vacuuming their job tables far more often; these trigger at 2% (plus 1,000 rows, so
-- a small table is not vacuumed after every few jobs), also after inserts alone (which
-- sets the visibility map that lets index-only reads skip the heap), and analyse as often
-- so that the planner keeps choosing the partial claim index. The cost delay is halved:
-- a vacuum of this table should finish quickly rather than politely.
-- They only tune when autovacuum runs; with `autovacuum = off` (some CI servers) nothing
-- changes. PGlite accepts and keeps them (it runs no autovacuum).
alter table ai_jobs set (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.02,
  autovacuum_vacuum_insert_threshold = 1000,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_analyze_threshold = 1000,
  autovacuum_vacuum_cost_delay = 1
);
