-- A WhatsApp message can quote an earlier one (swipe to reply): "Ja, klopt" under the
-- assistant's "Wil je de aanvraag op 12 mei?", or "en deze?" under the contact's own photo.
-- Twilio posts the quoted message's SID as OriginalRepliedMessageSid. Without it the model
-- read "Ja, klopt" as an answer to whatever came last. `replied_to_sid` keeps that SID as
-- Twilio sent it; whoever reads it looks it up among the same conversation's messages
-- (src/messaging/quotes.ts), so a SID of another conversation shows nothing of it, and a
-- quoted message that retention removed reads as no longer there.
alter table messages add column replied_to_sid text;

-- The webhook's two store functions with the SID as one more argument. They store as the
-- versions without it do (0023) and then note the quote, in the same transaction: a
-- worker never reads the message without it. Only a message just stored is noted (FOUND:
-- the call stored it), and only when it quotes one, so an ordinary message costs nothing
-- more. The versions without the argument stay for `aiq serve` processes of the previous
-- version during a rolling upgrade; they store no quote.
create function aiq_inbound_store(
  sender text,
  sender_name text,
  message_body text,
  media text[],
  sid text,
  job_type text,
  job_max_attempts int,
  opt_change text,
  to_number text,
  media_types text[],
  replied_to text           -- OriginalRepliedMessageSid, or null
) returns table (stored_message_id uuid, stored_conversation_id uuid)
language plpgsql as $$
begin
  return query
  select s.stored_message_id, s.stored_conversation_id
  from aiq_inbound_store(sender, sender_name, message_body, media, sid, job_type, job_max_attempts, opt_change, to_number, media_types) s;
  if found and replied_to is not null then
    update messages set replied_to_sid = replied_to where twilio_sid = sid;
  end if;
end
$$;

create function aiq_inbound_store_batch(
  senders text[],
  sender_names text[],
  bodies text[],
  sids text[],
  opt_changes text[],
  to_numbers text[],
  media_items int[],
  media_urls text[],
  media_types text[],
  job_type text,
  job_max_attempts int,
  replied_to_sids text[]    -- per message: OriginalRepliedMessageSid, or null
) returns table (item int, stored_message_id uuid, stored_conversation_id uuid)
language plpgsql as $$
begin
  return query
  select s.item, s.stored_message_id, s.stored_conversation_id
  from aiq_inbound_store_batch(senders, sender_names, bodies, sids, opt_changes, to_numbers, media_items, media_urls, media_types, job_type, job_max_attempts) s;
  if found and replied_to_sids is not null then
    -- A redelivered message keeps the quote it was stored with.
    update messages m set replied_to_sid = q.replied_to
    from unnest(sids, replied_to_sids) as q(sid, replied_to)
    where q.replied_to is not null and m.twilio_sid = q.sid and m.replied_to_sid is null;
  end if;
end
$$;
