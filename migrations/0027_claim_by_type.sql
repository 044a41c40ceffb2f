-- A worker claims only the job types it has a handler for. claim_ai_jobs took any type, and
-- a worker without a handler failed the job at once ("unknown job type"): during a rolling
-- deploy that adds a type, the old workers failed its first jobs for good, and two services
-- sharing one database failed each other's (found by a queue probe; graphile-worker and
-- pg-boss fetch only what a worker handles). Jobs of a type no worker handles now wait.
--
-- The claim with the types as a fourth argument (null: any type); the statement is 0018's
-- with one condition more. The three-argument form stays, for workers of the previous
-- version during a rolling upgrade and for `select * from claim_ai_jobs(10)` by hand, and
-- now calls this one.
--
-- Without bitmap scans: a claim wants the first jobs in the claim index's order, which an
-- index scan reads and stops. Where `ai_jobs` has no statistics yet (a table just filled,
-- before autovacuum's analyse, or a server with autovacuum off) the planner took a bitmap
-- scan that read every due job and sorted them, at every claim: 4.3 ms per claim of 10
-- from 20,000 due jobs against 0.02 ms (found measuring this migration's type condition,
-- which that plan evaluated on every due job: the drain at defaults fell 13%).
create function claim_ai_jobs(
  batch_size    int,
  worker_id     text,
  lease_seconds int,
  job_types     text[]
) returns setof ai_jobs
language plpgsql
set enable_bitmapscan = off
as $$
begin
  return query
  with claimed as (
    update ai_jobs j
    set status = 'processing',
        attempts = j.attempts + 1,
        locked_by = worker_id,
        locked_until = now() + make_interval(secs => lease_seconds),
        attempted_at = now(),
        updated_at = now()
    where j.id = any(array(
      select c.id
      from ai_jobs c
      where c.status = 'pending'
        and c.next_run_at <= now()
        and (job_types is null or c.type = any(job_types))
        and (c.ordering_key is null or not exists (
          select 1
          from ai_jobs earlier
          where earlier.ordering_key = c.ordering_key
            and earlier.status in ('pending', 'processing')
            and (earlier.status = 'processing' or earlier.seq < c.seq)
        ))
      order by c.priority, c.next_run_at
      limit batch_size
      for update of c skip locked
    ))
    returning j.*
  )
  select * from claimed order by priority, next_run_at, seq;
end
$$;

create or replace function claim_ai_jobs(
  batch_size    int,
  worker_id     text default 'sql',
  lease_seconds int default 300
) returns setof ai_jobs
language plpgsql as $$
begin
  return query select * from claim_ai_jobs(batch_size, worker_id, lease_seconds, null::text[]);
end
$$;
