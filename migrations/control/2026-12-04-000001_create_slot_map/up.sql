-- The live slot map: slot ranges whose owner differs from autumn.toml's `slots`, as range
-- moves (`move_slot run --slots A-B`) leave them. Every web replica routes by
-- directory row -> config pin -> this table -> autumn.toml, and reloads this table the
-- moment it changes (the trigger below), so a range flips everywhere at once, without a
-- deploy. `bookmarks slots` prints the effective map and the autumn.toml edit that folds
-- these rows in; `bookmarks slots compact` then removes the rows that change nothing.
CREATE TABLE _autumn_slot_map (
    first_slot INTEGER     NOT NULL,
    last_slot  INTEGER     NOT NULL,
    shard_name TEXT        NOT NULL CHECK (shard_name <> ''),
    -- The range move that wrote it (null: written by hand or by an older tool).
    move_id    BIGINT,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (first_slot),
    CONSTRAINT slot_map_range CHECK (0 <= first_slot AND first_slot <= last_slot AND last_slot < 16384),
    -- One owner per slot.
    CONSTRAINT slot_map_disjoint EXCLUDE USING gist (int4range(first_slot, last_slot, '[]') WITH &&)
);

-- Any change tells every web process to reload the whole map (it is small); Postgres
-- delivers the notification at commit, so a reload never sees the map from before it.
CREATE FUNCTION _autumn_slot_map_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('autumn_slot_map', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER _autumn_slot_map_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON _autumn_slot_map
    FOR EACH STATEMENT EXECUTE FUNCTION _autumn_slot_map_notify();

-- Range moves: the ranges (e.g. "0-4095,8000-8100"); `tenants` then lists the tenants
-- the bulk copy found, for the record (new tenants of the range move too).
ALTER TABLE tenant_moves ADD COLUMN slots TEXT;
-- A range move may find no tenant yet: it still moves the range, for the tenants to come.
ALTER TABLE tenant_moves DROP CONSTRAINT tenant_moves_some_tenants,
    ADD CONSTRAINT tenant_moves_some_tenants CHECK (cardinality(tenants) > 0 OR slots IS NOT NULL);
