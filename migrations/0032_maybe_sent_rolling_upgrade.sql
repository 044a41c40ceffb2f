-- A failed send recorded by a process of the version before 0031 (a rolling upgrade, old
-- and new processes side by side) sets status, error code and text but not `maybe_sent`,
-- which kept false for a 5xx: the new retry then resent without asking Twilio's Messages
-- list (the reply reached the contact twice if the 5xx came after Twilio took it), and the
-- delivery check never settled such an admin reply. The one 5xx text (the backfill in 0031,
-- src/messaging/transport.ts) marks it here, as the new code would have. The new code's own
-- writes already agree (a 5xx sets maybe_sent), so this only fills in the old ones; it may
-- be dropped once no process older than 0031 can run against the database.
create function messages_maybe_sent_of_old_writers() returns trigger
language plpgsql as $$
begin
  new.maybe_sent := true;
  return new;
end $$;

create trigger messages_maybe_sent_of_old_writers
  before update on messages
  for each row when (new.status = 'send_failed' and not new.maybe_sent and new.error_message like 'not sent: Twilio is unavailable (HTTP %')
  execute function messages_maybe_sent_of_old_writers();
