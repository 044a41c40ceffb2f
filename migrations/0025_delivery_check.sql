-- A reply whose status callbacks never came (aiq serve down or unreachable when Twilio
-- posted them; Twilio does not post them again) stayed `queued` or `sent` for good: a reply
-- WhatsApp refused later looked on its way, and its failure was never seen. The
-- `delivery_check` job asks Twilio for the status of replies that have been silent for a
-- while (src/jobs/delivery-status.ts). `status_checked_at` is when it last asked, so each is
-- asked again only now and then, and the others get their turn.
alter table messages add column status_checked_at timestamptz;

-- The replies still on their way, by age: the check reads those of the last days without
-- going through every message ever stored, nor through the ones stuck `sent` for longer.
create index messages_delivery_open_idx on messages (created_at)
  where status in ('accepted', 'scheduled', 'queued', 'sending', 'sent') and twilio_sid is not null;
