-- The change feed (`GET /api/changes`): one row per bookmark or collection a tenant has
-- ever had, saying when it last changed (`seq`) and whether it is gone (a tombstone).
--
-- seq is a per-tenant counter, not a time or a transaction id, and it is taken at COMMIT:
-- a deferred trigger takes the tenant's feed lock, numbers the transaction's rows after
-- the tenant's highest, and holds the lock until the commit is visible. So a tenant's seqs
-- become visible in order: once a reader sees seq n, every smaller seq that will ever
-- exist is already visible, and a transaction that began earlier but commits later still
-- gets a larger seq than anything a reader has seen. Timestamps cannot promise that (a
-- slow transaction commits a past time), and neither can a sequence taken mid-transaction.
-- The lock is held only from the commit's trigger to the commit itself, after the
-- transaction has taken its row locks, so it cannot deadlock with them.
--
-- Both tables are tenant tables: a move copies them with the rest, seqs unchanged, so a
-- cursor taken on the source continues on the destination.
CREATE TABLE feed_changes (
    tenant_id  TEXT        NOT NULL,
    item_id    UUID        NOT NULL,
    kind       TEXT        NOT NULL CHECK (kind IN ('bookmark', 'collection')),
    seq        BIGINT      NOT NULL CHECK (seq > 0),
    deleted    BOOLEAN     NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, item_id)
);
CREATE UNIQUE INDEX feed_changes_by_seq ON feed_changes (tenant_id, seq);
-- What the purge looks for.
CREATE INDEX feed_changes_tombstones ON feed_changes (changed_at) WHERE deleted;

-- The highest seq of a tenant's purged tombstones: a cursor below it may have missed one
-- (410 cursor_expired).
CREATE TABLE feed_horizons (
    tenant_id      TEXT   PRIMARY KEY,
    purged_through BIGINT NOT NULL
);

-- Rows written before the feed existed: collections first, then bookmarks, oldest first.
INSERT INTO feed_changes (tenant_id, item_id, kind, seq, deleted, changed_at)
SELECT tenant_id, id, kind,
       row_number() OVER (PARTITION BY tenant_id ORDER BY rank, created_at, id), false, at
FROM (
    SELECT tenant_id, id, 'collection' AS kind, 0 AS rank, created_at, updated_at AS at
    FROM collections
    UNION ALL
    SELECT tenant_id, id, 'bookmark', 1, created_at, updated_at FROM bookmarks
) existing;

-- The feed lock: exclusive per tenant (hashtext collisions only make two tenants wait for
-- each other), a class of its own beside the move guard's (1836021349).
CREATE FUNCTION _feed_lock(tenant TEXT) RETURNS void
LANGUAGE sql AS $$ SELECT pg_advisory_xact_lock(1717920100, hashtext(tenant)) $$;

-- DEFERRED AFTER row trigger on bookmarks and collections; TG_ARGV[0]: the kind. It runs
-- at COMMIT, once per row event, and records the row's state then: a row inserted and
-- deleted in one transaction leaves a tombstone, which is harmless to apply.
CREATE FUNCTION _feed_record_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tenant TEXT;
    item   UUID;
    gone   BOOLEAN;
BEGIN
    IF TG_OP = 'DELETE' THEN
        tenant := OLD.tenant_id; item := OLD.id;
    ELSE
        tenant := NEW.tenant_id; item := NEW.id;
    END IF;
    IF TG_ARGV[0] = 'bookmark' THEN
        gone := NOT EXISTS (SELECT 1 FROM bookmarks WHERE tenant_id = tenant AND id = item);
    ELSE
        gone := NOT EXISTS (SELECT 1 FROM collections WHERE tenant_id = tenant AND id = item);
    END IF;
    PERFORM _feed_lock(tenant);
    INSERT INTO feed_changes AS f (tenant_id, item_id, kind, seq, deleted)
    VALUES (tenant, item, TG_ARGV[0],
            coalesce((SELECT max(seq) FROM feed_changes WHERE tenant_id = tenant), 0) + 1,
            gone)
    ON CONFLICT (tenant_id, item_id) DO UPDATE
        SET seq = excluded.seq, deleted = excluded.deleted, changed_at = now(), kind = excluded.kind;
    RETURN NULL;
END $$;

-- The mover's own statements (copying rows in, deleting them out) record nothing: the
-- feed's rows move as rows of their own.
CREATE CONSTRAINT TRIGGER bookmarks_feed
    AFTER INSERT OR UPDATE OR DELETE ON bookmarks
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (coalesce(current_setting('autumn.move_bypass', true), '') = '')
    EXECUTE FUNCTION _feed_record_change('bookmark');
CREATE CONSTRAINT TRIGGER collections_feed
    AFTER INSERT OR UPDATE OR DELETE ON collections
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (coalesce(current_setting('autumn.move_bypass', true), '') = '')
    EXECUTE FUNCTION _feed_record_change('collection');

-- Moves capture and fence the feed's rows as they do the rows they describe.
CREATE TRIGGER feed_changes_tenant_guard
    AFTER INSERT OR UPDATE OR DELETE ON feed_changes
    FOR EACH ROW
    WHEN (coalesce(current_setting('autumn.move_bypass', true), '') = '')
    EXECUTE FUNCTION _autumn_guard_tenant_write('tenant_id', 'item_id');
CREATE TRIGGER feed_horizons_tenant_guard
    AFTER INSERT OR UPDATE OR DELETE ON feed_horizons
    FOR EACH ROW
    WHEN (coalesce(current_setting('autumn.move_bypass', true), '') = '')
    EXECUTE FUNCTION _autumn_guard_tenant_write('tenant_id', 'tenant_id');

-- Deletes tombstones older than `retention`, at most `tenants` tenants' worth per call,
-- and raises each tenant's horizon to the highest seq it deleted. A tenant's newest row is
-- kept whatever its age: the next seq is counted from it. A tenant the move guard refuses
-- (being moved, or gone) is skipped: it is purged where it lives. Returns the rows
-- deleted.
CREATE FUNCTION _feed_purge(retention INTERVAL, tenants INTEGER) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    t     TEXT;
    got   BIGINT;
    total BIGINT := 0;
BEGIN
    FOR t IN
        SELECT DISTINCT d.tenant_id FROM feed_changes d
        WHERE d.deleted AND d.changed_at < now() - retention
          AND EXISTS (SELECT 1 FROM feed_changes n WHERE n.tenant_id = d.tenant_id AND n.seq > d.seq)
        LIMIT tenants
    LOOP
        BEGIN
            PERFORM _feed_lock(t);
            WITH doomed AS (
                DELETE FROM feed_changes c
                WHERE c.tenant_id = t AND c.deleted AND c.changed_at < now() - retention
                  AND c.seq < (SELECT max(seq) FROM feed_changes WHERE tenant_id = t)
                RETURNING c.seq
            ), counted AS (
                SELECT count(*) AS n, max(seq) AS top FROM doomed
            ), raised AS (
                INSERT INTO feed_horizons AS h (tenant_id, purged_through)
                SELECT t, top FROM counted WHERE n > 0
                ON CONFLICT (tenant_id) DO UPDATE
                    SET purged_through = greatest(h.purged_through, excluded.purged_through)
            )
            SELECT counted.n INTO got FROM counted;
            total := total + got;
        EXCEPTION WHEN raise_exception THEN
            NULL;
        END;
    END LOOP;
    RETURN total;
END $$;
