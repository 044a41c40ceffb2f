-- Group commit, set-based (src/jobs/inbound-batch.ts). aiq_inbound_store_many (0019) wrote
-- a batch message by message, each through aiq_inbound_store's five-part statement: one
-- commit for the batch, but every part still ran once per message. aiq_inbound_store_batch
-- runs each part once for the whole batch: one contact upsert, one conversation upsert, one
-- message insert, one media insert, one job insert. Measured here in batches of five,
-- without commits: 0.18-0.19 ms of PostgreSQL per message instead of 0.27-0.30. The batch
-- comes as arrays, one element per message (cheaper to take apart than a JSON document).
--
-- What aiq_inbound_store guarantees holds per message: a MessageSid already stored inserts
-- nothing and leaves its contact and conversation alone; a contact's opt-out or opt-in
-- keyword is recorded; the conversation with the business number written to opens its
-- 24-hour window and gives the message the next inbound position under its row lock, held
-- until commit; the job is the queue's own insert (as ENQUEUE_UNNOTIFIED_SQL in
-- src/queue/store.ts writes it), quiet, for the store statement's pg_notify wakes the
-- workers (src/jobs/autoreply.ts, WAKE_WORKERS). test/inbound-batch.test.ts compares what
-- a batch stores with what the same messages stored one by one do.
--
-- One message per contact in a batch: a statement can update a row only once, and a
-- contact's messages must take their positions in order. The batcher never puts two
-- messages of one contact in a batch; were it called so, the upsert fails (21000) and the
-- batcher writes the messages one by one, as it does after any failure. Rows are locked in
-- the order of the contact's number, the same order in every batch, so that two batches in
-- flight (two writers, or two aiq serve processes) cannot deadlock.
--
-- aiq_inbound_store_many stays for the processes of the previous version while a rolling
-- upgrade runs.
create function aiq_inbound_store_batch(
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
          opted_out_at = case (select opt_change from batch where sender = excluded.whatsapp_number)
                           when 'out' then coalesce(k.opted_out_at, now()) when 'in' then null else k.opted_out_at end,
          opted_out_by = case (select opt_change from batch where sender = excluded.whatsapp_number)
                           when 'out' then coalesce(k.opted_out_by, 'contact') when 'in' then null else k.opted_out_by end,
          updated_at = now()
    returning k.id, k.whatsapp_number
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
    select job_type, jsonb_build_object('messageId', message.id, 'conversationId', message.conversation_id), now(),
           0, coalesce(job_max_attempts, 3), message.conversation_id::text
    from message, (select set_config('aiq.defer_notify', 'on', true)) as quiet
    returning payload
  )
  select batch.position, (job.payload->>'messageId')::uuid, (job.payload->>'conversationId')::uuid
  from job
  join message on message.id = (job.payload->>'messageId')::uuid
  join batch on batch.sid = message.twilio_sid;
end
$$;
