-- Suggestions (src/jobs/suggest.ts), two fixes found in review.
--
-- What a draft answers: the highest inbound position its prompt held. Sent unedited, the
-- admin message it becomes answers that far and no further; it used to count as answering
-- every message stored by the time it was sent, so a question that came in after the draft
-- was never answered (its autoreply found it "already answered"). Null for drafts made
-- before this column: those keep the old rule.
alter table suggestions add column context_until_seq bigint;

-- A discarded draft no longer blocks a new one for the same message: the admin discards it
-- and asks again. At most one pending or sent suggestion per message, as before.
alter table suggestions drop constraint suggestions_message_id_key;
create unique index suggestions_message_live_idx on suggestions (message_id) where status <> 'discarded';
create index suggestions_message_idx on suggestions (message_id);
