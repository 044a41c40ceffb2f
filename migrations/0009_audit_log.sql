-- What admins did, for accountability (GDPR art. 5(2)): when, who (a session, the admin
-- token, the CLI's user), what, on what, and how it ended. Never the personal data itself:
-- targets are ids, and an erasure records how much it removed, not whose data it was.
create table audit_log (
  id      bigint generated always as identity primary key,
  at      timestamptz not null default now(),
  actor   text not null check (actor <> ''),
  action  text not null check (action <> ''),
  target  text,
  result  text not null check (result in ('ok', 'refused', 'not_found', 'failed')),
  details jsonb not null default '{}'
);
create index audit_log_at_idx on audit_log (at desc);
