-- The knowledge the AI answers from: people (employees), documents and their chunks, CSV
-- imports with their row errors, and the AI's reply suggestions for admins. Embedding
-- columns are not here: their type (pgvector `vector(N)` or `real[]`) and size depend on the
-- database and configuration, so src/knowledge/vectors.ts adds them at start and records
-- what it built in knowledge_vector_settings.

create table people (
  id            uuid primary key default gen_random_uuid(),
  name          text not null check (name <> ''),
  -- E.164, normalised on the way in: the key imports upsert by and replies match senders by.
  phone         text not null unique check (phone ~ '^\+[1-9][0-9]{6,14}$'),
  email         text check (email is null or email ~ '^[^@\s]+@[^@\s]+$'),
  department    text,
  role          text,
  -- Any further CSV columns, by their header.
  attributes    jsonb not null default '{}' check (jsonb_typeof(attributes) = 'object'),
  -- sha256 of the embedded content: an import that changes nothing writes nothing.
  content_hash  text not null,
  -- The content_hash the stored embedding was made from; differs (or null) = stale.
  embedded_hash text,
  embedded_at   timestamptz,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now()
);

create table documents (
  id            uuid primary key default gen_random_uuid(),
  -- Saving a document of an existing title replaces it (aiq add-document twice updates).
  title         text not null unique check (title <> ''),
  -- Where it came from (a file name), for the admin.
  source        text,
  body          text not null,
  content_hash  text not null,
  embedded_hash text,
  embedded_at   timestamptz,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now()
);

-- Chunks are rebuilt whole when a document changes; `position` keeps their order.
create table document_chunks (
  id          uuid primary key default gen_random_uuid(),
  document_id uuid not null references documents (id) on delete cascade,
  position    int not null check (position >= 0),
  content     text not null check (content <> ''),
  unique (document_id, position)
);

-- What the embedding columns were built for. One row (id = 1). A start with another
-- provider, model or dimension rebuilds the columns and marks every record stale.
create table knowledge_vector_settings (
  id          int primary key default 1 check (id = 1),
  storage     text not null check (storage in ('pgvector', 'real[]')),
  provider    text not null,
  model       text not null,
  dimensions  int not null check (dimensions > 0),
  updated_at  timestamptz not null default now()
);

-- Cosine distance on real[], for servers without pgvector. Same meaning as pgvector's `<=>`
-- (1 - cosine similarity); null when either side has no length. Declared as the operator
-- `<=>` on real[] so one query text serves both storages.
create function aiq_cosine_distance(a real[], b real[]) returns double precision
language sql immutable strict parallel safe as $$
  select 1 - sum(x::double precision * y) / nullif(sqrt(sum(x::double precision * x)) * sqrt(sum(y::double precision * y)), 0)
  from unnest(a, b) as pair(x, y)
$$;

create operator <=> (leftarg = real[], rightarg = real[], function = aiq_cosine_distance, commutator = <=>);

-- One CSV import: a file on disk (CLI) or stored here (dashboard upload), its progress and
-- the rows it rejected. Re-running a file makes a new import that finds nothing to change.
create table imports (
  id          uuid primary key default gen_random_uuid(),
  kind        text not null default 'people' check (kind in ('people')),
  filename    text not null,
  -- Exactly one source: a path readable by the worker, or the uploaded bytes.
  path        text,
  content     bytea,
  status      text not null default 'pending' check (status in ('pending', 'running', 'done', 'failed')),
  rows_read   int not null default 0,
  inserted    int not null default 0,
  updated     int not null default 0,
  unchanged   int not null default 0,
  rejected    int not null default 0,
  -- [{line, reason}] for each rejected row, capped (the count above is exact).
  row_errors  jsonb not null default '[]',
  error       text,
  created_at  timestamptz not null default now(),
  started_at  timestamptz,
  finished_at timestamptz,
  constraint imports_one_source check ((path is null) <> (content is null)),
  constraint imports_finished_when_final check ((status in ('done', 'failed')) = (finished_at is not null))
);
create index imports_created_idx on imports (created_at desc);

-- A reply the AI proposes to an admin instead of sending it (the `suggest` job). One per
-- inbound message: a retried job finds it and stores nothing new. An admin sends it (as an
-- `admin` message through the outbox) or discards it; either decision is final.
create table suggestions (
  id              uuid primary key default gen_random_uuid(),
  conversation_id uuid not null references conversations (id) on delete cascade,
  message_id      uuid not null unique references messages (id) on delete cascade,
  body            text not null check (body <> ''),
  status          text not null default 'pending' check (status in ('pending', 'sent', 'discarded')),
  -- The admin message it became, once sent.
  sent_message_id uuid references messages (id) on delete set null,
  provider        text not null,
  model           text not null,
  -- {promptTokens, completionTokens, totalTokens} of the calls that produced it.
  usage           jsonb not null default '{}',
  created_at      timestamptz not null default now(),
  decided_at      timestamptz,
  constraint suggestions_decided_when_final check ((status = 'pending') = (decided_at is null)),
  constraint suggestions_sent_has_message check (status <> 'sent' or sent_message_id is not null)
);
create index suggestions_conversation_idx on suggestions (conversation_id, created_at desc);
create index suggestions_pending_idx on suggestions (created_at) where status = 'pending';

-- Tokens of every successful AI call, for cost: also the calls of attempts that failed later
-- (a reply composed, then Twilio refused, then composed again), which a job's `result`
-- alone would miss. `subject_id` is what the call served: the inbound message of a reply,
-- the record of an embedding. No foreign keys: usage outlives the rows it was spent on.
create table ai_usage (
  id                bigint generated always as identity primary key,
  purpose           text not null check (purpose in ('autoreply', 'suggest', 'embed_record', 'reembed')),
  subject_id        uuid,
  provider          text not null,
  model             text not null,
  operation         text not null check (operation in ('chat', 'embed')),
  prompt_tokens     int not null check (prompt_tokens >= 0),
  completion_tokens int not null check (completion_tokens >= 0),
  total_tokens      int not null check (total_tokens >= 0),
  created_at        timestamptz not null default now()
);
create index ai_usage_created_idx on ai_usage (created_at);
