-- A narrow search finds its matches through the GIN index on (tenant_id, document). Under
-- row-level security the planner may not use `document @@ query` as an index condition:
-- `@@` is not leakproof, so it must wait until the policy has passed each row, and the
-- search read every row of the shard's bookmark_search (a whale of 20 000 rows: ten times
-- slower; scripts/bench-rls-whale.sh). So the index step runs in a function exempt from the
-- policies that applies the same rule itself: only the declared tenant's documents.
--
-- Its owner, bookmarks_search, only owns it: it cannot log in, nobody is its member, and it
-- may read bookmark_search and nothing else. Roles are per server: created unless another
-- database there already has.
DO $$
BEGIN
    CREATE ROLE bookmarks_search NOLOGIN NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
GRANT USAGE ON SCHEMA public TO bookmarks_search;
GRANT SELECT ON bookmark_search TO bookmarks_search;

-- The tenant asked for must be the one the session declared (app.tenant_id, as the policy
-- reads it); any other gets no row.
CREATE FUNCTION search_matches(tenant TEXT, query TEXT) RETURNS SETOF UUID
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT s.bookmark_id FROM bookmark_search s
    WHERE s.tenant_id = tenant
      AND tenant = current_setting('app.tenant_id', true)
      AND s.document @@ websearch_to_tsquery('english', query)
$$;
ALTER FUNCTION search_matches(TEXT, TEXT) OWNER TO bookmarks_search;
REVOKE ALL ON FUNCTION search_matches(TEXT, TEXT) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_matches(TEXT, TEXT) TO bookmarks_app;
