-- An erasure that sticks. `aiq forget` removed a person and every trace of them, and the
-- next people sync (PEOPLE_SYNC_URL) or a CSV import that still listed them brought them
-- back, silently. An erasure now leaves a suppression record that the sync and the import
-- check each row against (src/privacy/suppression.ts): a keyed hash (HMAC-SHA256) of the
-- number and of the email address, never the number or the address itself. The key is
-- this installation's own, made here and kept in the database (so a backup restored
-- elsewhere still recognises its erased people, and the hashes mean nothing without it);
-- hex text, not bytea, so no text search over the tables stumbles on it.
create table installation_secrets (
  name text primary key,
  secret text not null,
  created_at timestamptz not null default now()
);
-- gen_random_uuid is a strong random source on both databases: two of them, 244 random bits.
insert into installation_secrets (name, secret)
values ('erasure_suppression', encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex'));

create table erasure_suppressions (
  phone_hash text primary key,
  email_hash text,
  erased_at timestamptz not null default now()
);
create index erasure_suppressions_email_idx on erasure_suppressions (email_hash) where email_hash is not null;

-- An import's rows skipped because their person was erased (each also in row_errors).
alter table imports add column erased_skipped int not null default 0;
