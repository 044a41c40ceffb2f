-- Indexes for the admin side at a million rows (measured: bench/dashboard-render.ts).
-- Both cost one more index entry per job state change; the status index already makes
-- those updates non-HOT, so no HOT update is lost.

-- The job list without a status filter (and with only a type filter) is newest first by
-- (created_at, id): without this it sorts the whole table (~150 ms at 1M rows), with it
-- it reads 50 index entries, and keyset page 1,000 costs what page 1 does.
create index ai_jobs_created_id_idx on ai_jobs (created_at desc, id desc);

-- The overview and /metrics count jobs by type and status: an index-only scan over this
-- is about twice as fast as the table scan (~80 ms vs ~140 ms at 1M rows).
create index ai_jobs_type_status_idx on ai_jobs (type, status);
