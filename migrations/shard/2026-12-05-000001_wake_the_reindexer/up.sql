-- The reindexer sleeps until a write wakes it instead of polling (app/search/reindexer.rs).
-- A sleeping leader arms the wakeup; the first write to mark a row after that disarms it
-- and sends the NOTIFY. Only that write pays for it: a transaction that notifies holds a
-- database-wide lock from its commit's start to its end, so a NOTIFY from every write
-- would serialize the shard's commits.
CREATE TABLE search_wakeup (
    one   BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    armed BOOLEAN NOT NULL DEFAULT false
);
INSERT INTO search_wakeup DEFAULT VALUES;

CREATE OR REPLACE FUNCTION _search_mark_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending (tenant_id, bookmark_id)
    SELECT tenant_id, id FROM changed
    ON CONFLICT DO NOTHING;
    -- Concurrent writers that all saw it armed queue on the row; once the first commits,
    -- the others find it disarmed and send nothing.
    IF (SELECT armed FROM search_wakeup) THEN
        UPDATE search_wakeup SET armed = false WHERE armed;
        IF FOUND THEN
            PERFORM pg_notify('search_pending', '');
        END IF;
    END IF;
    RETURN NULL;
END $$;
