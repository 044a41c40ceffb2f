-- Recurring jobs. A schedule is a cron expression in a time zone; every worker process
-- looks for due schedules and enqueues the slot's job with a job key unique to the slot
-- (schedule:<name>:<slot time>), so however many workers race for a slot, exactly one job
-- exists for it. Slots missed while nothing ran follow the schedule's backfill policy.
alter table ai_jobs add column job_key text;
create unique index ai_jobs_job_key_idx on ai_jobs (job_key) where job_key is not null;

create table ai_schedules (
  name            text primary key check (name ~ '^[a-z0-9][a-z0-9_.-]{0,99}$'),
  cron            text not null check (cron <> ''),
  time_zone       text not null default 'UTC',
  type            text not null check (type <> ''),
  payload         jsonb not null default '{}',
  enabled         boolean not null default true,
  -- none: skip missed slots; last: run the latest missed one; all: every one in the window.
  backfill        text not null default 'last' check (backfill in ('none', 'last', 'all')),
  backfill_window interval not null default '1 day',
  -- The next slot to enqueue, and what the last enqueue did.
  next_slot_at    timestamptz not null,
  last_slot_at    timestamptz,
  last_job_id     uuid,
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now()
);
create index ai_schedules_due_idx on ai_schedules (next_slot_at) where enabled;
