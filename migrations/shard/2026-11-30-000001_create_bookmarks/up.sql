-- Bookmarks live on the shard that owns their tenant; several tenants share a shard.
--
-- The primary key leads with tenant_id because every query, and every future slot move
-- (filter, copy, verify, delete by tenant), selects one tenant's rows; it also serves the
-- newest-first keyset listing. Ids are UUIDv7 minted by the application: time-ordered,
-- unique without coordination between web replicas or shards, so a row keeps its id when
-- its tenant moves and can never collide with rows already on the destination.
CREATE TABLE bookmarks (
    tenant_id  TEXT        NOT NULL,
    id         UUID        NOT NULL,
    url        TEXT        NOT NULL,
    title      TEXT        NOT NULL DEFAULT '',
    notes      TEXT        NOT NULL DEFAULT '',
    tags       TEXT[]      NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT bookmarks_url_length CHECK (octet_length(url) <= 2048),
    CONSTRAINT bookmarks_title_length CHECK (char_length(title) <= 300),
    CONSTRAINT bookmarks_notes_length CHECK (char_length(notes) <= 10000),
    CONSTRAINT bookmarks_tag_count CHECK (cardinality(tags) <= 20)
);

-- One bookmark per URL per tenant (a duplicate create answers 409 with the existing id).
CREATE UNIQUE INDEX bookmarks_tenant_url ON bookmarks (tenant_id, url);

-- Tag filter: `tags @> ARRAY[$tag]`, combined with the tenant predicate.
CREATE INDEX bookmarks_tags ON bookmarks USING gin (tags);
