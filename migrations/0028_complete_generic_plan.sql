-- A batch of completions as a function whose statement is always planned for any batch
-- (a generic plan): found by the primary key, whatever the batch holds.
--
-- The statement was a prepared statement of its own. PostgreSQL plans a prepared
-- statement's first five runs for the values they are given, in each connection apart,
-- and only then may keep one plan for all. Where `ai_jobs` has no statistics yet (a table
-- just filled, before autovacuum's analyse, or a server with autovacuum off), the plan for
-- 500 given ids was a sequential scan of the whole table: 7.6 ms for 500 of 20,000 rows,
-- where the primary key takes about half that. A worker completes on several connections
-- at once, each paying its own five, so in a 20,000-job drain nearly every completion
-- read the whole table; and behind a transaction-mode pooler, where statements are not
-- prepared, every completion is planned for its values. A function keeps its plans for
-- the session whatever the pooler does, and `plan_cache_mode` makes the first plan the
-- generic one, the plan the sixth run would have settled on.
--
-- The statement is the one src/queue/store.ts explains (fenced by worker, attempt and
-- lease). Workers of the previous version send it as before during a rolling upgrade.
create function complete_ai_jobs(
  job_ids      uuid[],
  job_attempts jsonb,   -- {"<id>": [attempt, …]}: the attempts each completion ran
  job_results  jsonb,   -- {"<id>/<attempt>": result}, or null when none returned anything
  worker_id    text
) returns table (completed_id uuid, completed_ordering_key text)
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
  return query
  update ai_jobs j
  set status = 'done',
      result = job_results -> (j.id::text || '/' || j.attempts),
      locked_until = null,
      finished_at = now(),
      updated_at = now()
  where j.id = any(job_ids)
    and (job_attempts -> j.id::text) @> to_jsonb(j.attempts)
    and j.locked_by = worker_id
    and j.locked_until is not null
  returning j.id, j.ordering_key;
end
$$;
