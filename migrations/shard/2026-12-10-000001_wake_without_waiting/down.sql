CREATE OR REPLACE FUNCTION _search_mark_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending AS p (tenant_id, bookmark_id)
    SELECT DISTINCT tenant_id, id FROM changed
    ON CONFLICT (tenant_id, bookmark_id) DO UPDATE SET since = p.since;
    IF (SELECT armed FROM search_wakeup) THEN
        UPDATE search_wakeup SET armed = false WHERE armed;
        IF FOUND THEN
            PERFORM pg_notify('search_pending', '');
        END IF;
    END IF;
    RETURN NULL;
END $$;
