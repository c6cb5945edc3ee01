-- Slot ownership, enforced by the shards themselves: once a slot range has moved away
-- (`move_slot run --slots A-B`), this shard refuses every write of a key in it, whatever a
-- web replica's slot map says, except for tenants the directory places here.

-- The key's slot, exactly as the Rust router computes it: FNV-1a 64 of the key's UTF-8
-- bytes, mod 16384. Only the low 14 bits of a product or an XOR depend on nothing but the
-- low 14 bits of its operands, so the hash runs in 14-bit arithmetic: basis
-- 0xcbf29ce484222325 mod 16384 = 8997, prime 0x100000001b3 mod 16384 = 435, and no step
-- can overflow an integer. Pinned by the golden vectors (tests/slot-vectors.tsv).
CREATE FUNCTION _autumn_slot(key TEXT) RETURNS INTEGER
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    bytes BYTEA   := convert_to(key, 'UTF8');
    h     INTEGER := 8997;
BEGIN
    FOR i IN 0 .. length(bytes) - 1 LOOP
        h := ((h # get_byte(bytes, i)) * 435) & 16383;
    END LOOP;
    RETURN h;
END
$$;

-- One row per slot this shard does not serve as the slot map's owner (or is handing
-- over): the range moves set them, one statement per range whatever its tenants.
--   capturing  the slot is being copied away: writes pass and their keys are logged
--   fenced     the final copy and verification are running: writes are refused
--   departed   the slot belongs to peer_shard: writes are refused, naming it
-- No row: the shard accepts the slot's keys (what every slot of a shard that never gave
-- one away looks like).
CREATE TABLE _autumn_slot_guard (
    slot       INTEGER     PRIMARY KEY CHECK (slot BETWEEN 0 AND 16383),
    move_id    BIGINT      NOT NULL,
    state      TEXT        NOT NULL CHECK (state IN ('capturing', 'fenced', 'departed')),
    peer_shard TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Tenants the tenant directory (or a config pin) places on this shard: they are written
-- here whatever their slot's guard says. `bookmarks pin` and `unpin` keep it in step with
-- the directory; a range move adds the tenants pinned to its source before it starts.
CREATE TABLE _autumn_placed_tenants (
    tenant_key TEXT        PRIMARY KEY,
    placed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The guard trigger, now also checking the slot. Every writing transaction reads
-- _autumn_slot_guard, so it holds that table's ACCESS SHARE lock to commit; a range's
-- guard change takes the table's ACCESS EXCLUSIVE lock, so it waits for every write
-- already past this check and every later write waits for it and then obeys it: one lock
-- for a range of any size, where a per-tenant lock would need one per tenant (the lock
-- table holds about 6 400). The tenant's own guard (a tenant move) comes first.
CREATE OR REPLACE FUNCTION _autumn_guard_tenant_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed JSONB;
    tenant  TEXT;
    slot_of INTEGER;
    g_state TEXT;
    g_move  BIGINT;
    g_peer  TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed := to_jsonb(OLD);
    ELSE
        changed := to_jsonb(NEW);
    END IF;
    tenant := changed ->> TG_ARGV[0];
    PERFORM pg_advisory_xact_lock_shared(1836021349, hashtext(tenant));
    SELECT g.state, g.move_id, g.peer_shard INTO g_state, g_move, g_peer
        FROM _autumn_tenant_guard g WHERE g.tenant_key = tenant;
    IF NOT FOUND THEN
        -- Cheap when this shard never gave a slot away: the table is empty.
        PERFORM 1 FROM _autumn_slot_guard LIMIT 1;
        IF FOUND THEN
            slot_of := _autumn_slot(tenant);
            SELECT g.state, g.move_id, g.peer_shard INTO g_state, g_move, g_peer
                FROM _autumn_slot_guard g WHERE g.slot = slot_of;
            IF FOUND AND EXISTS (SELECT 1 FROM _autumn_placed_tenants p WHERE p.tenant_key = tenant) THEN
                g_state := NULL;
            END IF;
        END IF;
    END IF;
    IF g_state IS NULL THEN
        RETURN NULL;
    ELSIF g_state = 'capturing' THEN
        INSERT INTO _autumn_move_changes (move_id, table_name, tenant_key, row_key)
        VALUES (g_move, TG_TABLE_NAME, tenant, changed ->> TG_ARGV[1]);
        IF TG_OP = 'UPDATE' AND (to_jsonb(OLD) ->> TG_ARGV[1]) IS DISTINCT FROM (changed ->> TG_ARGV[1]) THEN
            INSERT INTO _autumn_move_changes (move_id, table_name, tenant_key, row_key)
            VALUES (g_move, TG_TABLE_NAME, tenant, to_jsonb(OLD) ->> TG_ARGV[1]);
        END IF;
    ELSIF g_state = 'departed' AND slot_of IS NOT NULL THEN
        RAISE EXCEPTION 'slot % (tenant %) belongs to shard %, not this one', slot_of, tenant, g_peer
            USING HINT = 'autumn:slot-departed:' || g_peer, ERRCODE = 'P0001';
    ELSIF g_state = 'departed' THEN
        RAISE EXCEPTION 'tenant % has moved to shard %', tenant, g_peer
            USING HINT = 'autumn:tenant-departed:' || g_peer;
    ELSE
        RAISE EXCEPTION 'tenant % is being moved (move %)', tenant, g_move
            USING HINT = 'autumn:tenant-moving';
    END IF;
    RETURN NULL;
END
$$;
