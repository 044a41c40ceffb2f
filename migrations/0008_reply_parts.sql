-- Replies longer than WhatsApp's limit go out as numbered parts (src/messaging/reply-parts.ts).
-- Every part is its own outbox row, written together before the first is sent, so a retry
-- finds exactly the same parts and never composes them anew. The outbox's promise becomes:
-- at most one AI reply part per (answered inbound message, part number). A part whose turn
-- has not come yet waits in the new state `unsent`: written, never handed to Twilio, so a
-- crash between two parts resends no part and skips none.

alter table messages
  add column part int not null default 1,
  add column parts int not null default 1,
  add constraint messages_part_in_range check (part between 1 and parts);

drop index messages_ai_reply_once_idx;
create unique index messages_ai_reply_once_idx on messages (reply_to_message_id, part)
  where source = 'ai';

alter table messages drop constraint messages_status_check;
alter table messages add constraint messages_status_check check (status in (
  'received',
  'unsent', 'pending', 'send_failed', 'unconfirmed', 'flagged', 'logged',
  'accepted', 'scheduled', 'queued', 'sending', 'sent', 'delivered', 'read',
  'undelivered', 'failed', 'canceled'));
