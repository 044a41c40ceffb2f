-- How often a job was throttled (a 429 that gave its attempt back). A throttle that named no
-- wait (Twilio rarely sends Retry-After) was retried after a flat 5 s: a throttle lasting
-- minutes was hit every 5 s for the whole throttle window. The worker now backs off by this
-- count, as it does by `attempts` for failures (src/queue/backoff.ts, throttleDelaySeconds):
-- `attempts` cannot say it, since a throttled attempt is given back.
alter table ai_jobs
  add column throttles int not null default 0 check (throttles >= 0);
