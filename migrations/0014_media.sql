-- Inbound media (README, WhatsApp): one row per MediaUrlN of a message, stored by the
-- webhook's statement as `pending` and processed by the message's reply job before it
-- composes: downloaded with the account's credentials (only from the Twilio API host, up to
-- MEDIA_MAX_BYTES), kept here, and a voice note transcribed. The bytes live in the database
-- so that backups, erasure (on delete cascade) and several processes need nothing else.
create table message_media (
  id           uuid primary key default gen_random_uuid(),
  message_id   uuid not null references messages (id) on delete cascade,
  position     int not null check (position >= 0),
  url          text not null,
  -- As Twilio declared it (MediaContentTypeN); checked against the bytes.
  content_type text not null default '',
  --   pending    not processed yet; the reply waits for it
  --   stored     downloaded (and transcribed, when audio and a provider can)
  --   too_large  over MEDIA_MAX_BYTES: not fetched
  --   refused    not fetched or not kept: another host, a redirect elsewhere, a content type that lies
  --   failed     could not be fetched (after retries), or empty
  status       text not null default 'pending' check (status in ('pending', 'stored', 'too_large', 'refused', 'failed')),
  bytes        bytea,
  size         int check (size >= 0),
  transcript   text,
  -- Why it is not stored, or why a stored voice note has no transcript.
  note         text,
  created_at   timestamptz not null default now(),
  processed_at timestamptz,
  unique (message_id, position),
  constraint message_media_bytes_when_stored check ((status = 'stored') = (bytes is not null))
);
-- What a reply job looks for before it composes: the few files not processed yet.
create index message_media_pending_idx on message_media (message_id) where status = 'pending';
