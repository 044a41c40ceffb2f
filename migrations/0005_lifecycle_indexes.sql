-- Fewer index entries per job state change (issue #3: drain throughput).
--
-- A claim and a completion change `status`, so neither can be a HOT update: each writes a
-- new row version, and that version gets an entry in every index whose predicate it
-- matches. Three full indexes (status_created, created_id, type_status) took an entry at
-- the insert, the claim and the completion alike: 9 of the 15 index entries a job cost,
-- and about a quarter of the drain rate (measured: 24k → 32k jobs/s without them).
--
-- One partial index replaces the three for everything the admin side reads. It leaves out
-- processing rows, so a claim adds no entry to it and a completion adds one: listing and
-- counting processing jobs go through the lease index instead, which holds exactly them
-- (a few hundred per worker at most). Per job now: insert 3 entries (pkey, claim,
-- listing), claim 2 (pkey, lease), completion 4 (pkey, listing, finished, done by type).
--
--   * jobs of one status, newest first, keyset-paged: (status, created_at, id);
--   * all jobs, newest first: one such scan per status, merged (src/queue/admin.ts);
--   * a type filter is checked in the index: `type` rides along as INCLUDE.
drop index ai_jobs_status_created_idx;
drop index ai_jobs_created_id_idx;
drop index ai_jobs_type_status_idx;

create index ai_jobs_listing_idx on ai_jobs (status, created_at desc, id desc) include (type)
  where status in ('pending', 'done', 'failed', 'cancelled');

-- Counts per type for the overview and /metrics. Done jobs are nearly every row, and the
-- listing index is a poor way to count them: its keys are unique, so it cannot deduplicate
-- (112 MB at a million jobs; counting through it took ~200 ms). This one repeats a handful
-- of keys and deduplicates to a few MB. The other statuses are counted through the listing
-- index and the lease index.
create index ai_jobs_done_type_idx on ai_jobs (type) where status = 'done';
