-- The webhook's one write as a function (src/jobs/autoreply.ts, inboundStoreAndEnqueue).
--
-- The statement is the same as before: upsert the contact (recording an opt-out or opt-in
-- keyword) and its conversation (opening the 24-hour window, taking the next inbound
-- position under the conversation row's lock), insert the message and its media, enqueue
-- its autoreply job without NOTIFY; a redelivered MessageSid inserts nothing and returns
-- no row. What changes is where it is planned. Sent as a statement, PostgreSQL parsed and
-- planned its five common table expressions on every webhook: 0.40 ms of planning for
-- 0.44 ms of execution (EXPLAIN ANALYZE, measured here), and under load the webhook was
-- bound by PostgreSQL's CPU. PL/pgSQL keeps the plan for the rest of the session: a call
-- took 0.80 ms round trip instead of 1.5-1.9 ms, commit included. Plans live in the server
-- session, so this works through a transaction-mode pooler too (unlike named prepared
-- statements).
--
-- The job insert is the queue's own, as ENQUEUE_UNNOTIFIED_SQL (src/queue/store.ts) writes
-- it: the queue's defaults (due now, priority 0), the ordering key, and aiq.defer_notify
-- set for the transaction so that the notify trigger stays quiet (the caller wakes the
-- workers: the webhook's store statement calls pg_notify itself, src/jobs/autoreply.ts
-- WAKE_WORKERS). A change to either must change both; test/webhook.test.ts
-- compares the job this function writes with one the queue's insert writes.
create function aiq_inbound_store(
  sender text,              -- the contact's number, E.164
  sender_name text,         -- their WhatsApp profile name, or null
  message_body text,
  media text[],             -- MediaUrlN, in order
  sid text,                 -- the MessageSid: redeliveries are recognised by it
  job_type text,
  job_max_attempts int,
  opt_change text,          -- 'out', 'in' or null
  to_number text,           -- the business number written to; null: the default sender
  media_types text[]        -- MediaContentTypeN, in the order of media
) returns table (stored_message_id uuid, stored_conversation_id uuid)
language plpgsql as $$
begin
  return query
  with known as (
    select 1 from messages where twilio_sid = sid
  ), contact as (
    insert into contacts (whatsapp_number, profile_name, opted_out_at, opted_out_by)
    select sender, sender_name, case when opt_change = 'out' then now() end, case when opt_change = 'out' then 'contact' end
    where not exists (select 1 from known)
    on conflict (whatsapp_number) do update
      set profile_name = coalesce(excluded.profile_name, contacts.profile_name),
          opted_out_at = case opt_change when 'out' then coalesce(contacts.opted_out_at, now()) when 'in' then null else contacts.opted_out_at end,
          opted_out_by = case opt_change when 'out' then coalesce(contacts.opted_out_by, 'contact') when 'in' then null else contacts.opted_out_by end,
          updated_at = now()
    returning id
  ), conversation as (
    insert into conversations (contact_id, business_number, inbound_seq, last_inbound_at)
    select id, to_number, 1, now() from contact
    on conflict (contact_id, (coalesce(business_number, ''))) do update
      set last_message_at = now(), last_inbound_at = now(), inbound_seq = conversations.inbound_seq + 1
    returning id, inbound_seq
  ), message as (
    insert into messages (conversation_id, source, body, media_urls, twilio_sid, status, seq)
    select id, 'inbound', message_body, media, sid, 'received', inbound_seq from conversation
    on conflict (twilio_sid) do nothing
    returning id, conversation_id
  ), stored_media as (
    insert into message_media (message_id, position, url, content_type)
    select message.id, m.position - 1, m.url, m.content_type
    from message, unnest(media, media_types) with ordinality as m(url, content_type, position)
  ), job as (
    insert into ai_jobs (type, payload, next_run_at, priority, max_attempts, ordering_key)
    select job_type, jsonb_build_object('messageId', message.id, 'conversationId', message.conversation_id), now(),
           0, coalesce(job_max_attempts, 3), message.conversation_id::text
    from message, (select set_config('aiq.defer_notify', 'on', true)) as quiet
    returning payload
  )
  select (job.payload->>'messageId')::uuid, (job.payload->>'conversationId')::uuid from job;
end
$$;
