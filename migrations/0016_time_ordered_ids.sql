-- Time-ordered ids (UUID version 7, RFC 9562) for every table that had random ones.
--
-- A random uuid puts each new row's primary-key entry on a random leaf page. While the
-- index is small that costs nothing; at a million jobs (64 MB of ai_jobs_pkey, more than
-- the buffer cache keeps hot next to the table) every insert, claim and completion dirties
-- a different leaf, and the first change to a page after a checkpoint writes the whole
-- page to the WAL. Measured with EXPLAIN (ANALYZE, WAL) on 1,000,000 finished jobs:
-- enqueueing 20,000 jobs wrote 7,383 full pages (35 MB of WAL, 1.75 s); with these ids, 9
-- (9.9 MB, 0.30 s); claiming 1,000 went from 954 full pages to 33. New ids now land on the
-- right edge of each index, as a bigint sequence would, and stay uuids: nothing that
-- reads or links them changes. 74 of the 128 bits remain random, so ids stay unguessable;
-- the first 48 tell the creation time, which every table stores anyway.
-- PostgreSQL 18 has uuidv7(); this works on 15 and on PGlite, from built-in functions only.
create function aiq_uuid_v7() returns uuid language sql volatile parallel safe as $$
  select encode(
    set_bit(set_bit(
      -- bytes 0-5: Unix time in milliseconds (the low 6 bytes of an int8), over random bytes
      overlay(uuid_send(gen_random_uuid())
              placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
              from 1 for 6),
      -- version 7 (0111): gen_random_uuid's version is 4 (0100), so set bits 52 and 53
      52, 1), 53, 1),
    'hex')::uuid
$$;

alter table ai_jobs alter column id set default aiq_uuid_v7();
alter table contacts alter column id set default aiq_uuid_v7();
alter table conversations alter column id set default aiq_uuid_v7();
alter table messages alter column id set default aiq_uuid_v7();
alter table message_media alter column id set default aiq_uuid_v7();
alter table people alter column id set default aiq_uuid_v7();
alter table documents alter column id set default aiq_uuid_v7();
alter table document_chunks alter column id set default aiq_uuid_v7();
alter table imports alter column id set default aiq_uuid_v7();
alter table suggestions alter column id set default aiq_uuid_v7();
