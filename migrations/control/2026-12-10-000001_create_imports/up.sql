-- Bookmark imports. The file is parsed when it is posted; what is kept here is its entries,
-- already checked, in chunks of at most 1 000: a tenant job applies one chunk per shard
-- transaction and records it here afterwards. Entry ids are derived from the import and
-- the entry's place in the file, so a chunk applied again (its worker died between the
-- shard's commit and this table's update) finds its rows and writes none twice.
CREATE TABLE tenant_imports (
    id            UUID        PRIMARY KEY,
    tenant_key    TEXT        NOT NULL,
    -- The member who posted it; imported bookmarks are theirs.
    member_id     UUID,
    format        TEXT        NOT NULL CHECK (format IN ('netscape', 'json')),
    on_duplicate  TEXT        NOT NULL CHECK (on_duplicate IN ('skip', 'update')),
    state         TEXT        NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'done', 'failed')),
    -- Every folder path of the file, in file order: a JSON array of arrays of names.
    folders       JSONB       NOT NULL,
    parsed        INTEGER     NOT NULL,
    chunks        INTEGER     NOT NULL,
    chunks_done   INTEGER     NOT NULL DEFAULT 0,
    created       INTEGER     NOT NULL DEFAULT 0,
    updated       INTEGER     NOT NULL DEFAULT 0,
    skipped       INTEGER     NOT NULL DEFAULT 0,
    refused       INTEGER     NOT NULL,
    -- The first 100 refused entries, each with its place in the file and the reason.
    refusals      JSONB       NOT NULL,
    -- The last failure, while the job retries (or why it failed for good).
    last_error    TEXT,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ,
    CONSTRAINT tenant_imports_progress CHECK (chunks_done BETWEEN 0 AND chunks)
);

-- One import at a time per tenant: a second one is refused while the first is unfinished.
CREATE UNIQUE INDEX tenant_imports_one_unfinished ON tenant_imports (tenant_key)
    WHERE state IN ('queued', 'running');
CREATE INDEX tenant_imports_newest ON tenant_imports (tenant_key, created_at DESC, id DESC);

-- An unfinished import's entries; deleted when it finishes.
CREATE TABLE tenant_import_chunks (
    import_id UUID    NOT NULL REFERENCES tenant_imports (id) ON DELETE CASCADE,
    chunk     INTEGER NOT NULL,
    entries   JSONB   NOT NULL,
    PRIMARY KEY (import_id, chunk)
);
