-- A start keyword from a contact who never opted out is an ordinary message. The webhook
-- recorded every START as an opt-in, and its autoreply job, reading the keyword again, sent
-- "you are subscribed again" and nothing else: a contact who greets a bot with "Start"
-- (as many do) got a confirmation of something they never asked for, and no answer.
--
-- Only the store statement knows whether the contact was opted out when the message came,
-- and only its upsert knows it reliably: ON CONFLICT DO UPDATE sees the contact's newest
-- version under its row lock (a STOP stored by a concurrent webhook included), where a
-- read in the statement's snapshot would not. So the upsert records an opt-in that changed
-- something in the new `contacts.opted_in_at` (when the contact last came back), returns
-- whether it was this statement's, and the job's payload says so: a start keyword's job
-- carries `optIn`, true when the message opted the contact back in, false when they were
-- not opted out (the job then answers it as any message, src/jobs/autoreply.ts). Jobs
-- written before this migration carry no `optIn` and are handled as before.
--
-- The two store functions (0017, one message; 0020, a batch) are replaced with the same
-- signatures and results; only the payload gains the key, which the previous version's
-- workers ignore (their payload schema drops keys it does not know), so a rolling upgrade
-- can run both.
alter table contacts add column opted_in_at timestamptz;

create or replace function aiq_inbound_store(
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
          opted_in_at = case when opt_change = 'in' and contacts.opted_out_at is not null then now() else contacts.opted_in_at end,
          updated_at = now()
    returning id, coalesce(opted_in_at = now(), false) as opted_in
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
    select job_type,
           jsonb_build_object('messageId', message.id, 'conversationId', message.conversation_id)
             || case when opt_change = 'in' then jsonb_build_object('optIn', contact.opted_in) else '{}' end,
           now(), 0, coalesce(job_max_attempts, 3), message.conversation_id::text
    from message, contact, (select set_config('aiq.defer_notify', 'on', true)) as quiet
    returning payload
  )
  select (job.payload->>'messageId')::uuid, (job.payload->>'conversationId')::uuid from job;
end
$$;

create or replace function aiq_inbound_store_batch(
  senders text[],           -- per message: the contact's number, E.164
  sender_names text[],      -- their WhatsApp profile name, or null
  bodies text[],
  sids text[],              -- the MessageSid: redeliveries are recognised by it
  opt_changes text[],       -- 'out', 'in' or null
  to_numbers text[],        -- the business number written to; null: the default sender
  media_items int[],        -- per media file: its message's position in the arrays above (1-based)
  media_urls text[],        -- MediaUrlN, in order
  media_types text[],       -- MediaContentTypeN, '' where Twilio sent none
  job_type text,
  job_max_attempts int
) returns table (item int, stored_message_id uuid, stored_conversation_id uuid)
language plpgsql as $$
begin
  return query
  with batch as (
    select b.sender, b.sender_name, b.body, b.sid, b.opt_change, b.to_number, b.position::int as position
    from unnest(senders, sender_names, bodies, sids, opt_changes, to_numbers) with ordinality
      as b(sender, sender_name, body, sid, opt_change, to_number, position)
    -- A scalar subquery, not `not exists`: that one the planner may turn into an anti-join
    -- reading all of `messages`, a plan it would then keep for the session.
    where (select true from messages m where m.twilio_sid = b.sid) is null
  ), keyword as (
    -- The batch's opt-out and opt-in keywords, by sender and by MessageSid: usually none.
    -- Looked up below per row, where 0020 scanned the whole batch for each row (twice per
    -- contact: a cost that grew with the square of the batch).
    select coalesce(jsonb_object_agg(sender, opt_change), '{}') as by_sender,
           coalesce(jsonb_object_agg(sid, opt_change), '{}') as by_sid
    from batch
    where opt_change is not null
  ), media as (
    select f.item, f.url, f.content_type, row_number() over (partition by f.item order by f.n) - 1 as position
    from unnest(media_items, media_urls, media_types) with ordinality as f(item, url, content_type, n)
  ), contact as (
    insert into contacts as k (whatsapp_number, profile_name, opted_out_at, opted_out_by)
    select sender, sender_name, case when opt_change = 'out' then now() end, case when opt_change = 'out' then 'contact' end
    from batch
    order by sender
    on conflict (whatsapp_number) do update
      set profile_name = coalesce(excluded.profile_name, k.profile_name),
          opted_out_at = case (select by_sender ->> excluded.whatsapp_number from keyword)
                           when 'out' then coalesce(k.opted_out_at, now()) when 'in' then null else k.opted_out_at end,
          opted_out_by = case (select by_sender ->> excluded.whatsapp_number from keyword)
                           when 'out' then coalesce(k.opted_out_by, 'contact') when 'in' then null else k.opted_out_by end,
          opted_in_at = case when (select by_sender ->> excluded.whatsapp_number from keyword) = 'in' and k.opted_out_at is not null
                             then now() else k.opted_in_at end,
          updated_at = now()
    returning k.id, k.whatsapp_number, coalesce(k.opted_in_at = now(), false) as opted_in
  ), conversation as (
    insert into conversations as c (contact_id, business_number, inbound_seq, last_inbound_at)
    select contact.id, batch.to_number, 1, now()
    from batch join contact on contact.whatsapp_number = batch.sender
    order by batch.sender
    on conflict (contact_id, (coalesce(business_number, ''))) do update
      set last_message_at = now(), last_inbound_at = now(), inbound_seq = c.inbound_seq + 1
    returning c.id, c.contact_id, c.inbound_seq
  ), message as (
    insert into messages as m (conversation_id, source, body, media_urls, twilio_sid, status, seq)
    select conversation.id, 'inbound', batch.body,
           array(select media.url from media where media.item = batch.position order by media.position),
           batch.sid, 'received', conversation.inbound_seq
    from batch
    join contact on contact.whatsapp_number = batch.sender
    join conversation on conversation.contact_id = contact.id
    on conflict (twilio_sid) do nothing
    returning m.id, m.conversation_id, m.twilio_sid
  ), stored_media as (
    insert into message_media (message_id, position, url, content_type)
    select message.id, media.position, media.url, media.content_type
    from message
    join batch on batch.sid = message.twilio_sid
    join media on media.item = batch.position
  ), job as (
    insert into ai_jobs (type, payload, next_run_at, priority, max_attempts, ordering_key)
    select job_type,
           jsonb_build_object('messageId', message.id, 'conversationId', message.conversation_id)
             || case when (select by_sid ->> message.twilio_sid from keyword) = 'in'
                  then jsonb_build_object('optIn', (select contact.opted_in from contact join batch on batch.sender = contact.whatsapp_number
                                                     where batch.sid = message.twilio_sid))
                  else '{}' end,
           now(), 0, coalesce(job_max_attempts, 3), message.conversation_id::text
    from message, (select set_config('aiq.defer_notify', 'on', true)) as quiet
    returning payload
  )
  select batch.position, (job.payload->>'messageId')::uuid, (job.payload->>'conversationId')::uuid
  from job
  join message on message.id = (job.payload->>'messageId')::uuid
  join batch on batch.sid = message.twilio_sid;
end
$$;
