-- A batch claims its markers in one statement and deletes them by their row addresses in
-- another. The reindexer's session keeps the function's plans, made while the backlog was
-- small; with the claim inside `DELETE … WHERE (…) IN (SELECT … LIMIT … FOR UPDATE SKIP
-- LOCKED)`, such a plan scanned the whole table for each marker, and after a move deleted
-- a whale (100 000 markers at once) one batch ran on a core for minutes while the backlog
-- stood still (benches/move_delete.rs). The delete below is a TID scan whatever the
-- planner believes of the table's size, and the claim reads the batch oldest first.
CREATE OR REPLACE FUNCTION search_index_batch(batch_size INTEGER) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    rows    TID[];
    tenants TEXT[];
    ids     UUID[];
BEGIN
    -- The index write lock: batches and tenant rebuilds take turns.
    PERFORM pg_advisory_xact_lock(7310034283826717185);
    -- Locked until this transaction ends, so their addresses stay theirs.
    SELECT array_agg(ctid), array_agg(tenant_id), array_agg(bookmark_id) INTO rows, tenants, ids
    FROM (SELECT ctid, tenant_id, bookmark_id FROM search_pending
          ORDER BY since LIMIT batch_size FOR UPDATE SKIP LOCKED) AS picked;
    IF tenants IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM search_pending WHERE ctid = ANY (rows);
    PERFORM _search_apply(tenants, ids);
    DELETE FROM tenant_tags WHERE count <= 0 AND tenant_id = ANY (tenants);
    RETURN cardinality(ids);
END $$;
