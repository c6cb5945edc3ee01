DROP FUNCTION _search_analyze_pending();
DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['bookmarks', 'collections', 'bookmark_search', 'tenant_tags',
                             'search_pending', 'feed_changes', 'feed_horizons'] LOOP
        EXECUTE format('DROP POLICY declared_tenant ON %I', t);
        EXECUTE format('DROP POLICY every_tenant ON %I', t);
        EXECUTE format('DROP POLICY read_every_tenant ON %I', t);
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END $$;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    REVOKE ALL ON TABLES FROM bookmarks_app, bookmarks_reader, bookmarks_worker, bookmarks_mover;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    REVOKE ALL ON SEQUENCES FROM bookmarks_app, bookmarks_reader, bookmarks_worker, bookmarks_mover;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM bookmarks_app, bookmarks_reader, bookmarks_worker, bookmarks_mover;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM bookmarks_app, bookmarks_reader, bookmarks_worker, bookmarks_mover;
REVOKE ALL ON SCHEMA public FROM bookmarks_app, bookmarks_reader, bookmarks_worker, bookmarks_mover;
-- The roles stay: other databases on the server may use them.
