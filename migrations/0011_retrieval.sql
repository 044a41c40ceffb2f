-- Retrieval, round two (README, Knowledge and retrieval).
--
-- Chunks know where they stand: the headings above them, outermost first. Each chunk also
-- gets a full-text entry (title and headings weighted above the text) for the lexical half
-- of hybrid retrieval, in the text-search configuration aiq_text_search_config() returns;
-- a worker configured with another RAG_TEXT_SEARCH_CONFIG replaces the function and
-- rebuilds the entries (derived data, cheap to redo).
alter table document_chunks add column heading_path text[] not null default '{}';
alter table document_chunks add column search_vector tsvector;
create index document_chunks_search_idx on document_chunks using gin (search_vector);

create function aiq_text_search_config() returns regconfig
  language sql stable parallel safe as $$ select 'dutch'::regconfig $$;

-- A chunk's full-text entry: where it stands (title and headings) weighs as A, its text as B.
create function aiq_chunk_search_vector(title text, heading_path text[], content text) returns tsvector
  language sql stable parallel safe as $$
    select setweight(to_tsvector(aiq_text_search_config(), title || ' ' || array_to_string(heading_path, ' ')), 'A')
           || setweight(to_tsvector(aiq_text_search_config(), content), 'B')
  $$;

-- The chunking rule and settings a document's chunks were cut with (chunkingSignature());
-- null, as for every document from before this migration, or another value means a worker
-- cuts it again at start and queues its embedding.
alter table documents add column chunking text;

-- Citations: the chunks a reply's prompt carried, as they were then (document, heading
-- path, scores), since chunks are replaced when their document changes. Null for replies
-- written before this migration and for admin replies.
alter table messages add column citations jsonb;
alter table suggestions add column citations jsonb;

-- The offline embeddings became local-hashing-v2 (stopwords left out). Every document is cut
-- and embedded again at the next worker start (`chunking` is null above), so no v1 vector
-- outlives the upgrade: the space moves with it instead of waiting for `aiq reembed --switch`.
update knowledge_vector_settings set model = 'local-hashing-v2', updated_at = now()
where provider = 'local' and model = 'local-hashing-v1';

-- People are no longer embedded: a sender's own record is found by phone, and nothing
-- searched other people's records by meaning. Showing colleagues' records to whoever writes
-- would widen what the records are for; a "who does what" document does that job.
alter table people drop column if exists embedding;
alter table people drop column embedded_hash, drop column embedded_at;
