-- claim_ai_jobs in PL/pgSQL, the same statement (0001_queue.sql explains it), so that its
-- plan is kept for the session instead of made at every call: a SQL-language function
-- that returns a set is planned anew each time it runs. Measured here, one connection
-- claiming one job at a time: 0.58-0.66 ms per claim instead of 0.92-1.16 ms, and an empty
-- claim (an idle worker woken for nothing) 0.11-0.18 ms instead of 0.41-0.46 ms. Every
-- claim is on the path of a job's pickup latency. The plan lives in the server session,
-- so this holds through a transaction-mode pooler too.
create or replace function claim_ai_jobs(
  batch_size    int,
  worker_id     text default 'sql',
  lease_seconds int default 300
) returns setof ai_jobs
language plpgsql as $$
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
