CREATE OR REPLACE FUNCTION search_index_batch(batch_size INTEGER) RETURNS INTEGER
LANGUAGE plpgsql AS $$
DECLARE
    tenants TEXT[];
    ids     UUID[];
BEGIN
    PERFORM pg_advisory_xact_lock(7310034283826717185);
    WITH claimed AS (
        DELETE FROM search_pending p
        WHERE (p.tenant_id, p.bookmark_id) IN (
            SELECT tenant_id, bookmark_id FROM search_pending
            ORDER BY since LIMIT batch_size FOR UPDATE SKIP LOCKED)
        RETURNING p.tenant_id, p.bookmark_id
    )
    SELECT array_agg(tenant_id), array_agg(bookmark_id) INTO tenants, ids FROM claimed;
    IF tenants IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM _search_apply(tenants, ids);
    DELETE FROM tenant_tags WHERE count <= 0 AND tenant_id = ANY (tenants);
    RETURN cardinality(ids);
END $$;
