-- WhatsApp conversations: who wrote (contacts), the thread with each (conversations) and
-- every message in and out (messages). Outbound rows double as the reply outbox: a reply is
-- written before it is sent, so a crash can never send it twice unseen (src/messaging/outbox.ts).

create table contacts (
  id              uuid primary key default gen_random_uuid(),
  -- E.164 without the `whatsapp:` prefix: the key every inbound message upserts by.
  whatsapp_number text not null unique check (whatsapp_number ~ '^\+[1-9][0-9]{5,14}$'),
  -- WhatsApp's display name (Twilio's ProfileName); kept when a later message omits it.
  profile_name    text,
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now()
);

-- One conversation per contact: WhatsApp has one thread per number pair, and we send from one.
create table conversations (
  id              uuid primary key default gen_random_uuid(),
  contact_id      uuid not null unique references contacts (id) on delete cascade,
  -- Human takeover: while true, autoreply stores nothing and sends nothing.
  ai_paused       boolean not null default false,
  last_message_at timestamptz not null default now(),
  created_at      timestamptz not null default now()
);

-- Comparable progress of a delivery status, so that status callbacks arriving out of order
-- (Twilio does not promise order) never move a message backwards: `delivered` then `sent`
-- keeps `delivered`. Our outbox states rank 0: any word from Twilio outranks them.
create function message_status_rank(status text) returns int
language sql immutable strict parallel safe as $$
  select case status
    when 'accepted' then 1 when 'scheduled' then 1 when 'queued' then 1
    when 'sending' then 2
    when 'sent' then 3
    when 'delivered' then 4 when 'undelivered' then 4 when 'failed' then 4 when 'canceled' then 4
    when 'read' then 5
    else 0
  end
$$;

create table messages (
  id                  uuid primary key default gen_random_uuid(),
  conversation_id     uuid not null references conversations (id) on delete cascade,
  -- Who wrote it: the contact (inbound), the AI, or a human admin.
  source              text not null check (source in ('inbound', 'ai', 'admin')),
  direction           text not null generated always as
                        (case when source = 'inbound' then 'inbound' else 'outbound' end) stored,
  body                text not null default '',
  media_urls          text[] not null default '{}',
  -- Twilio's MessageSid. Unique: a redelivered webhook cannot store a message twice, and an
  -- outbound reply is confirmed by it. Null only while a reply is not yet confirmed.
  twilio_sid          text unique,
  -- Inbound: `received`. Outbound, our outbox states:
  --   pending      written, being handed to Twilio (or its sender died meanwhile)
  --   send_failed  Twilio refused for now (429, 5xx, unreachable): nothing went out, resend
  --   unconfirmed  a retry found it pending: it may have gone out; wait for the status callback
  --   flagged      no confirmation within REPLY_CONFIRM_TIMEOUT_SECONDS: a human must check
  --   logged       the log transport printed it (no Twilio credentials)
  -- then Twilio's own: accepted, scheduled, queued, sending, sent, delivered, read,
  -- undelivered, failed, canceled.
  status              text not null check (status in (
                        'received',
                        'pending', 'send_failed', 'unconfirmed', 'flagged', 'logged',
                        'accepted', 'scheduled', 'queued', 'sending', 'sent', 'delivered', 'read',
                        'undelivered', 'failed', 'canceled')),
  error_code          int,
  error_message       text,
  -- The inbound message a reply answers.
  reply_to_message_id uuid references messages (id) on delete set null,
  -- AI replies: the newest inbound message time the reply's context included. The
  -- done-is-noop guard compares against this, not against created_at: a message that
  -- arrived while the reply was being composed is not answered by it.
  context_until       timestamptz,
  -- When the current send attempt began: the confirmation deadline counts from it.
  send_started_at     timestamptz,
  status_updated_at   timestamptz not null default now(),
  created_at          timestamptz not null default now(),
  constraint messages_inbound_is_received
    check ((source = 'inbound') = (status = 'received')),
  constraint messages_inbound_has_sid
    check (source <> 'inbound' or twilio_sid is not null),
  constraint messages_reply_to_only_outbound
    check (source <> 'inbound' or reply_to_message_id is null)
);

-- The outbox's core: at most one AI reply per answered inbound message, whatever retries,
-- crashes or racing workers do. Admin replies may answer the same message freely.
create unique index messages_ai_reply_once_idx on messages (reply_to_message_id)
  where source = 'ai';
-- History for the AI context and the done-is-noop guard (newest AI reply of a conversation).
create index messages_conversation_created_idx on messages (conversation_id, created_at);
-- Replies still waiting for Twilio, for the dashboard's "needs attention" view.
create index messages_outbox_open_idx on messages (status, send_started_at)
  where status in ('pending', 'send_failed', 'unconfirmed', 'flagged');
-- Inbox ordering.
create index conversations_last_message_idx on conversations (last_message_at desc);
