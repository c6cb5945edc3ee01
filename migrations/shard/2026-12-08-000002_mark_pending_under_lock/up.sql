-- A write that finds its row's marker already pending now takes that marker's row lock
-- (`DO UPDATE` of nothing) instead of leaving it be (`DO NOTHING`).
--
-- Before, a reindex batch could claim such a marker between the write's trigger and its
-- commit, read the row as it was before the write, and delete the only marker: the write
-- committed with nothing left to index it, and the document and the tag counts kept the
-- old values for good (seen when a tag rename met a batch of a bulk insert's markers). Now
-- the batch's `FOR UPDATE SKIP LOCKED` passes over a marker whose writer has not
-- committed, and takes it in a later batch that sees the write; a writer that finds a
-- marker already claimed waits for that batch to end and then inserts a fresh one.
CREATE OR REPLACE FUNCTION _search_mark_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending AS p (tenant_id, bookmark_id)
    SELECT DISTINCT tenant_id, id FROM changed
    ON CONFLICT (tenant_id, bookmark_id) DO UPDATE SET since = p.since;
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
