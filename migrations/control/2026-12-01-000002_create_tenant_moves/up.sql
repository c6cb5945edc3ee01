-- One row per tenant move made by move_slot: what moves where, how far it got, and what
-- it counted, so that a killed move can be inspected (`move_slot status`), finished
-- (`resume`) or undone (`abort`).
CREATE TABLE tenant_moves (
    id              BIGSERIAL   PRIMARY KEY,
    tenants         TEXT[]      NOT NULL,
    from_shard      TEXT        NOT NULL,
    to_shard        TEXT        NOT NULL,
    -- Set when the move was asked for by slot (`--slot N`).
    slot            INTEGER,
    state           TEXT        NOT NULL DEFAULT 'planned'
        CHECK (state IN ('planned', 'copying', 'copied', 'fenced', 'verified', 'repinned', 'done', 'aborted')),
    -- Started with --confirm: resuming it deletes the source rows too.
    confirm         BOOLEAN     NOT NULL DEFAULT false,
    -- Each tenant's directory row before the move (shard name, or null for none), which
    -- an abort restores.
    previous        JSONB       NOT NULL DEFAULT '{}',
    rows_copied     BIGINT      NOT NULL DEFAULT 0,
    changes_applied BIGINT      NOT NULL DEFAULT 0,
    rows_verified   BIGINT      NOT NULL DEFAULT 0,
    rows_deleted    BIGINT      NOT NULL DEFAULT 0,
    -- Per table: rows and checksum as verified, to tell whether the destination was
    -- written to since.
    checksums       JSONB,
    -- How long the tenant's writes were refused: from the fence to the re-pin.
    fence_ms        BIGINT,
    last_error      TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    copy_started_at TIMESTAMPTZ,
    copied_at       TIMESTAMPTZ,
    fenced_at       TIMESTAMPTZ,
    verified_at     TIMESTAMPTZ,
    repinned_at     TIMESTAMPTZ,
    finished_at     TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT tenant_moves_two_shards CHECK (from_shard <> to_shard),
    CONSTRAINT tenant_moves_some_tenants CHECK (cardinality(tenants) > 0)
);

-- A tenant belongs to at most one unfinished move: the primary key refuses a second.
CREATE TABLE tenant_move_members (
    tenant_key TEXT   PRIMARY KEY,
    move_id    BIGINT NOT NULL REFERENCES tenant_moves (id)
);
