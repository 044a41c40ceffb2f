-- Several business numbers (README, WhatsApp): a conversation is a (contact, business
-- number) pair, the number being the one the contact wrote to (Twilio's `To`), and replies
-- leave from it. Null is the default sender (TWILIO_WHATSAPP_FROM), so every conversation
-- from before this migration stays one thread with it.
alter table conversations
  add column business_number text check (business_number is null or business_number ~ '^\+[1-9][0-9]{5,14}$');
alter table conversations drop constraint conversations_contact_id_key;
create unique index conversations_contact_number_idx on conversations (contact_id, coalesce(business_number, ''));
-- The dashboard's filter by number.
create index conversations_number_recent_idx on conversations (business_number, last_message_at desc);

-- Documents carry tags; an assistant profile may use only the documents with its tags.
alter table documents add column tags text[] not null default '{}';
