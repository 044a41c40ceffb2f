-- Indexes the admin side needs on an organisation's database (hundreds of thousands of
-- messages), each checked by test/query-plans.test.ts.
--
-- The conversation list counts each conversation's replies that did not reach the contact
-- and that no later reply has answered for (src/http/admin/conversation-queries.ts, with
-- answeredSinceSql of src/messaging/conversations.ts). Both halves walked every message of
-- the conversation through (conversation_id, created_at): the count for each message, the
-- "answered since?" test once per problem reply. A conversation with 1,400 send_failed
-- replies (a Twilio outage) among 20,000 messages cost 28 million row visits, 15 s per list
-- page; the retry, un-hold and thread views ask the same question per reply.

-- The replies that answer what they covered (answersSomethingSql: not failed, send_failed,
-- held), by how far their context reached: "a reply answered for it since" reads the first
-- entries at or past the problem reply's position, and a reply nothing answered reads none.
create index messages_answering_idx on messages (conversation_id, context_until_seq)
  where source <> 'inbound' and status not in ('failed', 'send_failed', 'held');

-- The problem replies themselves (UNDELIVERED_REPLY_STATUSES_SQL): a handful per
-- conversation, so the count reads those instead of the whole thread.
create index messages_undelivered_idx on messages (conversation_id)
  where source <> 'inbound' and status in ('failed', 'undelivered', 'send_failed', 'flagged', 'held', 'unconfirmed');

-- The references to a message that deleting it must clear (ON DELETE SET NULL): PostgreSQL
-- looks them up once per deleted message, and without an index each lookup read the whole
-- table. Erasing a person with 80 messages took 12.5 s on 420,000 messages (3.7 s more
-- with a suggestion drafted for each inbound message), one with 20,000 messages about an
-- hour; the retention purge deleted 100 messages in 18 s. Partial: inbound messages and
-- most suggestions reference nothing.
create index messages_reply_to_idx on messages (reply_to_message_id) where reply_to_message_id is not null;
create index suggestions_sent_message_idx on suggestions (sent_message_id) where sent_message_id is not null;

-- The failure texts of replies, for a person's export and erasure, which look for any that
-- names their number (MESSAGE_ERRORS_NAMING_PERSON, src/privacy/erasure.ts): few messages
-- have one, and without this every message was read once per written form of the number.
create index messages_error_idx on messages (created_at) where error_message is not null;
