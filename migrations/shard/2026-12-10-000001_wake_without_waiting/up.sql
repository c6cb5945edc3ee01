-- A write that finds the reindexer's wakeup armed no longer waits for another writer that is
-- disarming it.
--
-- Before, every writer that saw the wakeup armed queued on its row until the first one to
-- disarm it committed: one long transaction (an import's chunk of 1 000 rows) stalled every
-- bookmark write of the shard, every tenant's, for as long as it ran. Now a writer that
-- finds the row locked goes on: the writer holding it sends the notification when it
-- commits, and the reindexer's backstop poll (every second) finds the rows if that writer
-- rolls back instead.
CREATE OR REPLACE FUNCTION _search_mark_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending AS p (tenant_id, bookmark_id)
    SELECT DISTINCT tenant_id, id FROM changed
    ON CONFLICT (tenant_id, bookmark_id) DO UPDATE SET since = p.since;
    IF (SELECT armed FROM search_wakeup) THEN
        PERFORM 1 FROM search_wakeup WHERE armed FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            UPDATE search_wakeup SET armed = false WHERE armed;
            PERFORM pg_notify('search_pending', '');
        END IF;
    END IF;
    RETURN NULL;
END $$;
