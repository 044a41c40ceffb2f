-- A reply Twilio reported `undelivered` answers nothing now, as a `failed` one
-- (answersSomethingSql of src/messaging/conversations.ts): it never reached the contact.
-- messages_answering_idx (0033) holds the replies that answer something, so it is rebuilt
-- without them. The old one still served the queries (its predicate, leaving out fewer
-- statuses, is implied by theirs), but every "answered since?" probe then read the
-- undelivered replies past its position and discarded them: a contact WhatsApp cannot
-- reach, each reply undelivered, costs each problem reply a read of all the later ones
-- (400 such replies: 80,400 rows for the thread's page, test/query-plans.test.ts).
-- Rebuilt in the migration's transaction, which blocks storing messages while it runs:
-- 0.6 s for a million messages, measured on a shared 2-vCPU machine.
drop index messages_answering_idx;
create index messages_answering_idx on messages (conversation_id, context_until_seq)
  where source <> 'inbound' and status not in ('failed', 'undelivered', 'send_failed', 'held');
