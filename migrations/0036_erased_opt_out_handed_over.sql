-- An erasure's kept opt-out (0035) is handed to the contact that a later message from the
-- number makes, once. The record kept it after that, so once that contact had ended it
-- (START, or an admin's opt-in) and was later removed without an erasure (the retention
-- purge takes a contact a year after its last message), the next message made a contact
-- opted out again: never answered, and nothing told them, though they had sent START.
-- From the handover the contact holds the opt-out as any contact does; erasing it again
-- records its state anew. A lifted record (0035) kept only for its opt-out then goes.
create function aiq_erased_opt_out_handed_over() returns trigger
language plpgsql as $$
begin
  -- As aiq_erased_opt_out: the usual case, no erasure kept an opt-out, hashes nothing.
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
