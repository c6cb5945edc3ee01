-- Full-text search, maintained asynchronously by the shard's reindexer (one leader per
-- shard, see app/search/), not by the request path: a write only records that its row
-- needs indexing, in the same transaction, and stays cheap.
--
-- Dirty markers rather than an outbox: a marker is one row per bookmark, so a hot row
-- written a thousand times before the reindexer looks is indexed once, the backlog is
-- bounded by the number of rows rather than of writes, and `since` (kept from the first
-- unindexed write) is exactly the indexing lag. The reindexer deletes the markers it
-- claims in the transaction that writes the documents; a write that lands meanwhile
-- waits for that delete and then leaves a fresh marker, so no write is ever lost.

-- btree_gin lets one GIN index serve "this tenant's documents matching this query".
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- The search document of a bookmark, weighted: title, then tags, then URL, then notes.
-- The same function builds the index and searches rows not yet indexed.
CREATE FUNCTION bookmark_document(title TEXT, url TEXT, notes TEXT, tags TEXT[])
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
        || setweight(to_tsvector('english'::regconfig, array_to_string(tags, ' ')), 'B')
        || setweight(to_tsvector('english'::regconfig, coalesce(url, '')), 'C')
        || setweight(to_tsvector('english'::regconfig, coalesce(notes, '')), 'D')
$$;

-- Derived data: rebuilt, never moved (move_slot copies bookmarks; the destination's
-- reindexer indexes what arrives). `tags` are the tags this document was counted with.
CREATE TABLE bookmark_search (
    tenant_id   TEXT        NOT NULL,
    bookmark_id UUID        NOT NULL,
    document    tsvector    NOT NULL,
    tags        TEXT[]      NOT NULL DEFAULT '{}',
    indexed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, bookmark_id)
);
CREATE INDEX bookmark_search_document ON bookmark_search USING gin (tenant_id, document);

-- Per-tenant tag counts: the sum of bookmark_search.tags, kept equal by the reindexer.
CREATE TABLE tenant_tags (
    tenant_id TEXT   NOT NULL,
    tag       TEXT   NOT NULL,
    count     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, tag)
);

CREATE TABLE search_pending (
    tenant_id   TEXT        NOT NULL,
    bookmark_id UUID        NOT NULL,
    since       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, bookmark_id)
);
CREATE INDEX search_pending_since ON search_pending (since);

-- Statement-level, over the statement's transition table: one set-based insert per
-- statement rather than a function call per row, so move_slot's bulk COPY (which fires
-- these too, and so gets the copied rows indexed on the destination as they arrive) keeps
-- its speed. A transition table serves one event per trigger, hence three.
CREATE FUNCTION _search_mark_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending (tenant_id, bookmark_id)
    SELECT tenant_id, id FROM changed
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER bookmarks_search_inserted AFTER INSERT ON bookmarks
REFERENCING NEW TABLE AS changed
FOR EACH STATEMENT EXECUTE FUNCTION _search_mark_pending();
CREATE TRIGGER bookmarks_search_updated AFTER UPDATE ON bookmarks
REFERENCING NEW TABLE AS changed
FOR EACH STATEMENT EXECUTE FUNCTION _search_mark_pending();
CREATE TRIGGER bookmarks_search_deleted AFTER DELETE ON bookmarks
REFERENCING OLD TABLE AS changed
FOR EACH STATEMENT EXECUTE FUNCTION _search_mark_pending();

-- Rows written before this migration are indexed by the reindexer like any other.
INSERT INTO search_pending (tenant_id, bookmark_id) SELECT tenant_id, id FROM bookmarks;

-- Brings the documents and tag counts of the given rows in line with bookmarks, in one
-- statement (one snapshot): each document's tags and the counts change together. The
-- caller holds the index write lock (below), so nothing else writes these tables meanwhile.
CREATE FUNCTION _search_apply(tenants TEXT[], ids UUID[]) RETURNS INTEGER
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT * FROM unnest(tenants, ids) AS b(tenant_id, bookmark_id)
    ), cur AS (
        SELECT k.tenant_id, k.id AS bookmark_id, k.tags,
               bookmark_document(k.title, k.url, k.notes, k.tags) AS document
        FROM bookmarks k JOIN batch b ON k.tenant_id = b.tenant_id AND k.id = b.bookmark_id
    ), old AS (
        SELECT s.tenant_id, s.bookmark_id, s.tags
        FROM bookmark_search s JOIN batch b USING (tenant_id, bookmark_id)
    ), delta AS (
        SELECT tenant_id, tag, sum(d)::BIGINT AS d
        FROM (SELECT tenant_id, unnest(tags) AS tag, -1 AS d FROM old
              UNION ALL
              SELECT tenant_id, unnest(tags), 1 FROM cur) x
        GROUP BY tenant_id, tag HAVING sum(d) <> 0
    ), docs AS (
        INSERT INTO bookmark_search AS s (tenant_id, bookmark_id, document, tags, indexed_at)
        SELECT tenant_id, bookmark_id, document, tags, now() FROM cur
        ON CONFLICT (tenant_id, bookmark_id) DO UPDATE
            SET document = EXCLUDED.document, tags = EXCLUDED.tags, indexed_at = now()
        RETURNING 1
    ), gone AS (
        DELETE FROM bookmark_search s USING old o
        WHERE s.tenant_id = o.tenant_id AND s.bookmark_id = o.bookmark_id
          AND NOT EXISTS (SELECT 1 FROM cur c
                          WHERE c.tenant_id = o.tenant_id AND c.bookmark_id = o.bookmark_id)
        RETURNING 1
    ), counted AS (
        INSERT INTO tenant_tags AS t (tenant_id, tag, count)
        SELECT tenant_id, tag, d FROM delta
        ON CONFLICT (tenant_id, tag) DO UPDATE SET count = t.count + EXCLUDED.count
        RETURNING 1
    )
    SELECT ((SELECT count(*) FROM docs) + (SELECT count(*) FROM gone)
            + 0 * (SELECT count(*) FROM counted))::INTEGER
$$;

-- The reindexer's unit of work: claims up to batch_size of the oldest markers and
-- indexes their rows. Returns how many rows it indexed (0: the backlog is empty).
CREATE FUNCTION search_index_batch(batch_size INTEGER) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    tenants TEXT[];
    ids     UUID[];
BEGIN
    -- The index write lock: batches and tenant rebuilds take turns.
    PERFORM pg_advisory_xact_lock(7310034283826717185);
    WITH claimed AS (
        DELETE FROM search_pending p
        WHERE (p.tenant_id, p.bookmark_id) IN (
            SELECT tenant_id, bookmark_id FROM search_pending
            ORDER BY since LIMIT batch_size FOR UPDATE SKIP LOCKED)
        RETURNING p.tenant_id, p.bookmark_id
    )
    SELECT array_agg(tenant_id), array_agg(bookmark_id) INTO tenants, ids FROM claimed;
    IF tenants IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM _search_apply(tenants, ids);
    DELETE FROM tenant_tags WHERE count <= 0 AND tenant_id = ANY (tenants);
    RETURN cardinality(ids);
END $$;

-- Rebuilds one tenant's documents and tag counts from scratch (the reindex_tenant job).
-- Returns how many documents the tenant has now.
CREATE FUNCTION search_reindex_tenant(tenant TEXT) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    n INTEGER;
BEGIN
    PERFORM pg_advisory_xact_lock(7310034283826717185);
    -- First: a write that commits after this takes a fresh marker and is indexed again.
    DELETE FROM search_pending WHERE tenant_id = tenant;
    DELETE FROM bookmark_search WHERE tenant_id = tenant;
    DELETE FROM tenant_tags WHERE tenant_id = tenant;
    WITH cur AS (
        SELECT tenant_id, id, tags, bookmark_document(title, url, notes, tags) AS document
        FROM bookmarks WHERE tenant_id = tenant
    ), docs AS (
        INSERT INTO bookmark_search (tenant_id, bookmark_id, document, tags)
        SELECT tenant_id, id, document, tags FROM cur
        RETURNING 1
    ), counted AS (
        INSERT INTO tenant_tags (tenant_id, tag, count)
        SELECT tenant_id, tag, count(*) FROM cur, unnest(tags) AS tag GROUP BY tenant_id, tag
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM docs) + 0 * (SELECT count(*) FROM counted) INTO n;
    RETURN n;
END $$;
