-- Seed-style enqueues: the original design note inserts a job as a payload alone, its type
-- inside it: `insert into ai_jobs (payload) values ('{"type": "embed_record", …}')`. The
-- type column then comes from the payload; an explicit type column always wins. Without a
-- type anywhere the insert fails with a message that says what to do. The WHEN clause keeps
-- ordinary enqueues (type given) from calling the function at all.

create function ai_jobs_type_from_payload() returns trigger
language plpgsql as $$
begin
  new.type := nullif(new.payload ->> 'type', '');
  if new.type is null then
    raise exception 'ai_jobs: a job needs a type: set the type column, or put "type" in the payload, e.g. {"type": "autoreply", ...}'
      using errcode = 'not_null_violation', table = 'ai_jobs', column = 'type';
  end if;
  return new;
end $$;

create trigger ai_jobs_type_from_payload
  before insert on ai_jobs
  for each row when (new.type is null)
  execute function ai_jobs_type_from_payload();
