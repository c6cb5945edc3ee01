-- Back to the guard of tenant moves alone.
CREATE OR REPLACE FUNCTION _autumn_guard_tenant_write() RETURNS trigger
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

DROP TABLE _autumn_placed_tenants;
DROP TABLE _autumn_slot_guard;
DROP FUNCTION _autumn_slot(TEXT);
