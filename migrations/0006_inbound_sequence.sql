-- A reply answers exactly what it read. Inbound messages get a position per conversation
-- in the order they became visible: the webhook bumps conversations.inbound_seq in the same
-- statement that upserts the conversation row, and that row stays locked until commit, so a
-- later position is never visible before an earlier one. (created_at, the start of the
-- inserting transaction, could commit out of order and mark an unread message answered.)
-- Replies record the highest position they covered in context_until_seq: an AI reply the
-- last inbound message its prompt contained, an admin reply every message visible when it
-- was written. "Answered" is then exactly: seq <= context_until_seq of a reply that went out.

alter table conversations add column inbound_seq bigint not null default 0;
alter table messages add column seq bigint;
alter table messages add column context_until_seq bigint;

-- Existing rows: positions in arrival order, replies covering what their old rule covered.
-- An AI reply's context_until was the newest message's created_at as the job read it, a
-- JavaScript Date: milliseconds, where created_at holds microseconds. Compared as written,
-- the newest message a reply read would count as unanswered, and be answered again by the
-- next reply; the old rule compared two such Dates, so it compares in milliseconds here.
with numbered as (
  select id, row_number() over (partition by conversation_id order by created_at, id) as seq
  from messages where source = 'inbound'
)
update messages m set seq = numbered.seq from numbered where m.id = numbered.id;

update conversations c
set inbound_seq = coalesce((select max(seq) from messages m where m.conversation_id = c.id and m.source = 'inbound'), 0);

update messages r
set context_until_seq = (
  select coalesce(max(i.seq), 0) from messages i
  where i.conversation_id = r.conversation_id and i.source = 'inbound'
    and case when r.source = 'ai' then date_trunc('milliseconds', i.created_at) <= r.context_until else i.created_at < r.created_at end)
where r.source <> 'inbound' and (r.source = 'admin' or r.context_until is not null);

alter table messages drop column context_until;

alter table messages
  add constraint messages_seq_only_inbound check ((source = 'inbound') = (seq is not null)),
  add constraint messages_context_only_outbound check (source <> 'inbound' or context_until_seq is null);

-- One position per message of a conversation; also serves "the unanswered inbound messages".
create unique index messages_inbound_seq_idx on messages (conversation_id, seq) where source = 'inbound';
