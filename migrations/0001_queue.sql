-- The job queue. Knows nothing of WhatsApp or LLMs: a job is a type, a JSON payload and
-- the bookkeeping that gets it run exactly when it should. Life cycle: docs/job-lifecycle.md.

create table ai_jobs (
  id            uuid primary key default gen_random_uuid(),
  -- Insertion order: ordering keys run their jobs by it (uuids do not sort by time).
  seq           bigint generated always as identity,
  type          text not null check (type <> ''),
  payload       jsonb not null,
  status        text not null default 'pending'
                check (status in ('pending', 'processing', 'done', 'failed', 'cancelled')),
  -- Smaller runs first, as in graphile-worker and Oban; most jobs keep the default 0.
  priority      int not null default 0,
  -- Jobs sharing a key run one at a time, in insertion order (a conversation, say).
  ordering_key  text,
  attempts      int not null default 0 check (attempts >= 0),
  max_attempts  int not null default 3 check (max_attempts >= 1),
  next_run_at   timestamptz not null default now(),
  last_error    text,
  -- One entry per failed attempt: {attempt, worker, started_at, duration_ms, error, at}.
  -- Appended only on failure, so a successful run costs no extra write (as Oban does).
  errors        jsonb not null default '[]',
  -- What the handler returned (token usage, say), written with the completion itself.
  result        jsonb,
  locked_by     text,
  locked_until  timestamptz,
  attempted_at  timestamptz,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  finished_at   timestamptz,
  -- A job being worked on always has a lease; no other state keeps one.
  constraint ai_jobs_lease_only_while_processing
    check ((status = 'processing') = (locked_until is not null)),
  constraint ai_jobs_finished_at_when_final
    check ((status in ('done', 'failed', 'cancelled')) = (finished_at is not null))
);

-- The claim reads only due pending rows in claim order; finished rows (millions, kept for
-- the dashboard until retention removes them) are not in this index at all.
create index ai_jobs_claim_idx on ai_jobs (priority, next_run_at) where status = 'pending';
-- The ordering-key check looks for an earlier unfinished job of the same key.
create index ai_jobs_ordering_idx on ai_jobs (ordering_key, seq)
  where ordering_key is not null and status in ('pending', 'processing');
-- The reaper finds expired leases.
create index ai_jobs_lease_idx on ai_jobs (locked_until) where status = 'processing';
-- The dashboard lists newest first, filtered by status; retention deletes by finished_at.
create index ai_jobs_status_created_idx on ai_jobs (status, created_at desc);
create index ai_jobs_finished_idx on ai_jobs (finished_at) where finished_at is not null;

-- Wake idle workers. Once per statement, not per row: a bulk insert of 20,000 jobs sends
-- one notification (Postgres folds equal notifications within a transaction anyway).
-- NOTIFY is only a latency hint; workers poll as well.
-- A transaction that has notified takes a global lock at commit, so notifying commits run
-- one at a time. Hot paths (the webhook) therefore enqueue with `aiq.defer_notify` set for
-- their transaction and notify once for all their jobs (src/jobs/autoreply.ts).
create function ai_jobs_notify() returns trigger language plpgsql as $$
begin
  if coalesce(current_setting('aiq.defer_notify', true), '') <> 'on' then
    perform pg_notify('aiq_jobs', '');
  end if;
  return null;
end
$$;

create trigger ai_jobs_notify_insert
  after insert on ai_jobs
  for each statement execute function ai_jobs_notify();

-- Claims up to batch_size due jobs for one worker, atomically.
--   * FOR UPDATE SKIP LOCKED: concurrent claimers never wait on, or take, each other's rows.
--   * Due pending jobs only, by priority then next_run_at.
--   * A job with an ordering key is claimable only when no job of its key is processing and
--     none inserted before it is still pending (even one waiting out a backoff), so a key's
--     jobs run one at a time and in order. Two rows of one key never pass together: the
--     later one always sees the earlier as pending.
--   * Each claim starts an attempt: attempts + 1, and a lease of lease_seconds for worker_id.
--   * `id = any(array(…))` rather than a CTE joined back on id: the locked ids become one
--     index scan for the update instead of a join, about a fifth less time per claimed row.
--     The rows stay locked by the inner select until the update, so none can change between.
--     The update returns rows in id order, so they are sorted back into claim order.
-- Called as in the seed, `select * from claim_ai_jobs(10)`, or with a worker and lease.
create function claim_ai_jobs(
  batch_size    int,
  worker_id     text default 'sql',
  lease_seconds int default 300
) returns setof ai_jobs language sql as $$
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
$$;
