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
