-- WhatsApp as people use it (README, WhatsApp).
--
-- Opt-out: a contact who sends a stop keyword (OPT_OUT_KEYWORDS: STOP, STOPPEN, AFMELDEN,
-- UNSUBSCRIBE) is opted out — no AI reply, no suggestion or admin message sent — until they
-- send a start keyword (START) or an admin records that they opted in again. Set by the
-- webhook's own statement, so the state changes with the message that asked for it, before
-- any job runs. `opted_out_by` says who: the contact (a keyword) or an admin.
alter table contacts
  add column opted_out_at timestamptz,
  add column opted_out_by text check (opted_out_by in ('contact', 'admin')),
  add constraint contacts_opted_out_by_when_out check ((opted_out_at is null) = (opted_out_by is null));

-- The 24-hour customer-service window opens with every inbound message: free-form replies
-- are allowed until last_inbound_at + 24 hours (README, WhatsApp).
alter table conversations add column last_inbound_at timestamptz;
update conversations c set last_inbound_at = (
  select max(m.created_at) from messages m where m.conversation_id = c.id and m.source = 'inbound'
);

-- A reply outside the window is sent as the configured approved template (its Content SID
-- recorded here), or, when none is configured, `held`: written, never handed to Twilio,
-- flagged for a human with the reason in error_message.
alter table messages add column template_sid text;
alter table messages drop constraint messages_status_check;
alter table messages add constraint messages_status_check check (status in (
  'received',
  'unsent', 'pending', 'send_failed', 'unconfirmed', 'flagged', 'held', 'logged',
  'accepted', 'scheduled', 'queued', 'sending', 'sent', 'delivered', 'read',
  'undelivered', 'failed', 'canceled'));
