-- Back to a reindexer that polls.
CREATE OR REPLACE FUNCTION _search_mark_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending (tenant_id, bookmark_id)
    SELECT tenant_id, id FROM changed
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

DROP TABLE search_wakeup;
