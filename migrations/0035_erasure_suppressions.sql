-- An erasure that sticks. `aiq forget` removed a person and every trace of them, and the
-- next people sync (PEOPLE_SYNC_URL) or a CSV import that still listed them brought them
-- back, silently. An erasure now leaves a suppression record that the sync and the import
-- check each row against (src/privacy/suppression.ts): a keyed hash (HMAC-SHA256) of the
-- number and of the email address, never the number or the address itself. The key is
-- this installation's own, made here and kept in the database (so a backup restored
-- elsewhere still recognises its erased people, and the hashes mean nothing without it);
-- hex text, not bytea, so no text search over the tables stumbles on it.
create table installation_secrets (
  name text primary key,
  secret text not null,
  created_at timestamptz not null default now()
);
-- gen_random_uuid is a strong random source on both databases: two of them, 244 random bits.
insert into installation_secrets (name, secret)
values ('erasure_suppression', encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex'));

create table erasure_suppressions (
  phone_hash text primary key,
  email_hash text,
  erased_at timestamptz not null default now()
);
create index erasure_suppressions_email_idx on erasure_suppressions (email_hash) where email_hash is not null;

-- An import's rows skipped because their person was erased (each also in row_errors).
alter table imports add column erased_skipped int not null default 0;

-- An erasure kept no opt-out. A contact who had sent STOP and then asked to be erased lost
-- the STOP with their contact row: when they wrote again (or an admin wrote back) nothing
-- remembered it, and the AI answered them, though a contact who is opted out and writes
-- again stays opted out until they send START (0023). So the record also says whether the
-- contact was opted out when erased (when, and by whom: the refusal names it), and the
-- store functions, which make the contact of a number they do not know, make it opted out
-- from the start; a START as its first message opts it back in and is confirmed as one.
-- The functions are 0023's, with only the contact's insert changed; 0026's, with the
-- quote, call them, and so do `aiq serve` processes of the previous version.
alter table erasure_suppressions
  add column opted_out_at timestamptz,
  add column opted_out_by text check (opted_out_by in ('contact', 'admin')),
  -- Lifted (aiq forget --lift): imports take the person again; an opt-out stays.
  add column lifted_at timestamptz;
create index erasure_suppressions_opted_out_idx on erasure_suppressions (phone_hash) where opted_out_at is not null;

-- The keyed hash of src/privacy/suppression.ts (HMAC-SHA256 of "<kind>:<value>" with the
-- installation's key), in SQL for the store functions: PGlite has no pgcrypto, and the
-- key is 32 bytes, so it is padded to the 64-byte block here as RFC 2104 says.
create function aiq_erasure_hash(kind text, value text) returns text
language plpgsql stable as $$
declare
  key bytea := decode((select secret from installation_secrets where name = 'erasure_suppression'), 'hex');
  inner_pad bytea;
  outer_pad bytea;
begin
  key := key || decode(repeat('00', 64 - length(key)), 'hex');
  inner_pad := key;
  outer_pad := key;
  for i in 0..63 loop
    inner_pad := set_byte(inner_pad, i, get_byte(key, i) # 54);   -- 0x36
    outer_pad := set_byte(outer_pad, i, get_byte(key, i) # 92);   -- 0x5c
  end loop;
  return encode(sha256(outer_pad || sha256(inner_pad || convert_to(kind || ':' || value, 'UTF8'))), 'hex');
end
$$;

-- The opt-out an erasure kept is looked up in the store functions' contact insert below,
-- inline (carried): no row when no erasure kept one, which is the usual case, or when the
-- number has a contact already (its own state holds). Both tests only read the sender, so
-- the planner makes them one gate before the lookup (a one-time filter): the usual message
-- costs one probe of an empty partial index and hashes nothing. Not a PL/pgSQL function
-- returning those rows: called in the insert, it cost 17 ms a message (measured, single
-- store: 20 ms a call against 0.5 without it), the webhook's throughput cut to a fifth.
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
    insert into contacts (whatsapp_number, profile_name, opted_out_at, opted_out_by, opted_in_at)
    select sender, sender_name,
           case opt_change when 'out' then now() when 'in' then null else carried.opted_out_at end,
           case opt_change when 'out' then 'contact' when 'in' then null else carried.opted_out_by end,
           case when opt_change = 'in' and carried.opted_out_at is not null then now() end
    from (select 1) as one left join lateral (
      select s.opted_out_at, s.opted_out_by from erasure_suppressions s
      where exists (select 1 from erasure_suppressions kept where kept.opted_out_at is not null)
        and not exists (select 1 from contacts c where c.whatsapp_number = sender)
        and s.opted_out_at is not null and s.phone_hash = aiq_erasure_hash('phone', sender)
    ) as carried on true
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
    insert into contacts as k (whatsapp_number, profile_name, opted_out_at, opted_out_by, opted_in_at)
    select sender, sender_name,
           case opt_change when 'out' then now() when 'in' then null else carried.opted_out_at end,
           case opt_change when 'out' then 'contact' when 'in' then null else carried.opted_out_by end,
           case when opt_change = 'in' and carried.opted_out_at is not null then now() end
    from batch left join lateral (
      select s.opted_out_at, s.opted_out_by from erasure_suppressions s
      where exists (select 1 from erasure_suppressions kept where kept.opted_out_at is not null)
        and not exists (select 1 from contacts c where c.whatsapp_number = batch.sender)
        and s.opted_out_at is not null and s.phone_hash = aiq_erasure_hash('phone', batch.sender)
    ) as carried on true
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

-- The erasure's kept opt-out (above) is handed to the contact that a later message from the
-- number makes, once. The record kept it after that, so once that contact had ended it
-- (START, or an admin's opt-in) and was later removed without an erasure (the retention
-- purge takes a contact a year after its last message), the next message made a contact
-- opted out again: never answered, and nothing told them, though they had sent START.
-- From the handover the contact holds the opt-out as any contact does; erasing it again
-- records its state anew. A lifted record (above) kept only for its opt-out then goes.
create function aiq_erased_opt_out_handed_over() returns trigger
language plpgsql as $$
begin
  -- As the store functions' lookup: the usual case, no erasure kept an opt-out, hashes nothing.
  if exists (select 1 from erasure_suppressions s where s.opted_out_at is not null) then
    update erasure_suppressions set opted_out_at = null, opted_out_by = null
    where phone_hash = aiq_erasure_hash('phone', new.whatsapp_number) and opted_out_at is not null;
    if found then
      delete from erasure_suppressions
      where phone_hash = aiq_erasure_hash('phone', new.whatsapp_number) and lifted_at is not null;
    end if;
  end if;
  return null;
end
$$;

-- After insert: a message for a number that has a contact updates it (on conflict), and
-- fires nothing here. Only a contact made with an opt-out or an opt-in took one over: one
-- made without (a message that waited on the erasure's lock and read the contact before it
-- went, so no opt-out was carried) leaves the record as it is.
create trigger contacts_erased_opt_out_handed_over
  after insert on contacts
  for each row when (new.opted_out_at is not null or new.opted_in_at is not null)
  execute function aiq_erased_opt_out_handed_over();
