-- Online tenant moves (move_slot) are enforced by the shards themselves, in the same
-- transaction as every write, so that no web replica's routing cache, however stale, can
-- write a moving tenant's rows where they would be lost.
--
-- A guard row says what is happening to one tenant on this shard:
--   capturing  the tenant is being copied away: writes pass and are logged below
--   fenced     the final copy and verification are running: writes are refused
--   departed   the tenant now lives on peer_shard: writes are refused, naming it
--   incoming   the tenant is being copied here: only the mover may write
-- No row (the normal case) means writes pass untouched.
CREATE TABLE _autumn_tenant_guard (
    tenant_key TEXT        PRIMARY KEY,
    move_id    BIGINT      NOT NULL,
    state      TEXT        NOT NULL
        CHECK (state IN ('capturing', 'fenced', 'departed', 'incoming')),
    peer_shard TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Keys of rows written while their tenant was capturing: the mover re-copies them after
-- the bulk copy, and deletes each entry once it is applied on the destination.
CREATE TABLE _autumn_move_changes (
    seq        BIGSERIAL PRIMARY KEY,
    move_id    BIGINT NOT NULL,
    table_name TEXT   NOT NULL,
    tenant_key TEXT   NOT NULL,
    row_key    TEXT   NOT NULL
);
CREATE INDEX _autumn_move_changes_move ON _autumn_move_changes (move_id, seq);

-- AFTER INSERT/UPDATE/DELETE on a tenant table; TG_ARGV: tenant column, key column.
-- AFTER, not BEFORE: an exception here still undoes the write, and a BEFORE row trigger
-- stops COPY from inserting in batches (the mover's bulk copy of 100 000 rows ran at
-- 47-54k rows/s with one, 61-78k with this). The WHEN clause skips the mover's own statements (copying rows in, deleting
-- them out), so they queue no trigger events at all.
--
-- The shared advisory lock on the tenant is held to commit. The mover changes a tenant's
-- guard while holding the same lock exclusively, so the change waits for every write of
-- that tenant already past this check, and every later write waits for the change and
-- then sees it. Without that barrier a write that checked "no guard" just before a fence
-- could commit just after it and be missed by the final copy.
CREATE FUNCTION _autumn_guard_tenant_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed JSONB;
    tenant  TEXT;
    guard   _autumn_tenant_guard%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed := to_jsonb(OLD);
    ELSE
        changed := to_jsonb(NEW);
    END IF;
    tenant := changed ->> TG_ARGV[0];
    PERFORM pg_advisory_xact_lock_shared(1836021349, hashtext(tenant));
    SELECT * INTO guard FROM _autumn_tenant_guard WHERE tenant_key = tenant;
    IF FOUND THEN
        IF guard.state = 'capturing' THEN
            INSERT INTO _autumn_move_changes (move_id, table_name, tenant_key, row_key)
            VALUES (guard.move_id, TG_TABLE_NAME, tenant, changed ->> TG_ARGV[1]);
            IF TG_OP = 'UPDATE' AND (to_jsonb(OLD) ->> TG_ARGV[1]) IS DISTINCT FROM (changed ->> TG_ARGV[1]) THEN
                INSERT INTO _autumn_move_changes (move_id, table_name, tenant_key, row_key)
                VALUES (guard.move_id, TG_TABLE_NAME, tenant, to_jsonb(OLD) ->> TG_ARGV[1]);
            END IF;
        ELSIF guard.state = 'departed' THEN
            RAISE EXCEPTION 'tenant % has moved to shard %', tenant, guard.peer_shard
                USING HINT = 'autumn:tenant-departed:' || guard.peer_shard;
        ELSE
            RAISE EXCEPTION 'tenant % is being moved (move %)', tenant, guard.move_id
                USING HINT = 'autumn:tenant-moving';
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER bookmarks_tenant_guard
    AFTER INSERT OR UPDATE OR DELETE ON bookmarks
    FOR EACH ROW
    WHEN (coalesce(current_setting('autumn.move_bypass', true), '') = '')
    EXECUTE FUNCTION _autumn_guard_tenant_write('tenant_id', 'id');
