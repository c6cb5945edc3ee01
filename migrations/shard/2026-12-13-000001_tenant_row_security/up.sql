-- The shards enforce tenant isolation themselves: a statement sees and changes only the rows
-- of the tenant its session declared, whatever its WHERE clause says (docs/security.md).
--
-- Roles are per server, not per database, so they are created only if another database on
-- the same server has not created them already (two shards may share a server). None can
-- log in: the login a shard URL names switches to one of them (SET ROLE), per checkout.
--   bookmarks_app     a tenant's requests: DML, on the rows of the tenant the session
--                     declared (app.tenant_id), whatever the statement's WHERE says
--   bookmarks_reader  admin views and stats: every tenant's rows, read only
--   bookmarks_worker  jobs that work a whole shard (the reindexer, the feed's purge):
--                     every tenant's rows
--   bookmarks_mover   the mover: copies whole slot ranges with COPY, which row-level
--                     security does not allow, so it bypasses the policies
DO $$
DECLARE
    r TEXT;
BEGIN
    FOREACH r IN ARRAY ARRAY['bookmarks_app', 'bookmarks_reader', 'bookmarks_worker'] LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE', r);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
        END;
    END LOOP;
    BEGIN
        CREATE ROLE bookmarks_mover NOLOGIN NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
END $$;

GRANT USAGE ON SCHEMA public TO bookmarks_app, bookmarks_reader, bookmarks_worker, bookmarks_mover;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public
    TO bookmarks_app, bookmarks_worker, bookmarks_mover;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO bookmarks_reader;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public
    TO bookmarks_app, bookmarks_worker, bookmarks_mover;
-- Readiness reads which migrations are applied; only the migrator writes them.
REVOKE INSERT, UPDATE, DELETE ON __diesel_schema_migrations
    FROM bookmarks_app, bookmarks_worker, bookmarks_mover;
-- Tables and sequences later migrations create get the same grants.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES
    TO bookmarks_app, bookmarks_worker, bookmarks_mover;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO bookmarks_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES
    TO bookmarks_app, bookmarks_worker, bookmarks_mover;

-- Every table with a tenant's rows. A role no policy names sees no row and writes none, and
-- a bookmarks_app session that declared no tenant matches no row. Forced: the tables'
-- owner is held to the policies too (superusers and BYPASSRLS roles are not, which is why
-- the app refuses to run as one).
--
-- The declared tenant is read once per statement (the sub-select), not once per row: a
-- per-row current_setting() made a whole-tenant scan inside a per-row trigger cost
-- seconds. A single equality also lets the planner use it as an index condition.
DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['bookmarks', 'collections', 'bookmark_search', 'tenant_tags',
                             'search_pending', 'feed_changes', 'feed_horizons'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY declared_tenant ON %I TO bookmarks_app
            USING (tenant_id = (SELECT current_setting('app.tenant_id', true)))
            WITH CHECK (tenant_id = (SELECT current_setting('app.tenant_id', true)))$p$, t);
        EXECUTE format($p$CREATE POLICY every_tenant ON %I TO bookmarks_worker
            USING (true) WITH CHECK (true)$p$, t);
        EXECUTE format($p$CREATE POLICY read_every_tenant ON %I FOR SELECT TO bookmarks_reader
            USING (true)$p$, t);
    END LOOP;
END $$;

-- The reindexer analyzes its backlog when it jumps, so that the planner sees it; only a
-- table's owner may, so the owner lends it this one statement.
CREATE FUNCTION _search_analyze_pending() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    ANALYZE search_pending;
END $$;
REVOKE ALL ON FUNCTION _search_analyze_pending() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _search_analyze_pending() TO bookmarks_worker;
