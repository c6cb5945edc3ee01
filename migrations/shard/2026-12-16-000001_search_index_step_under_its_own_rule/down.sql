DROP FUNCTION search_matches(TEXT, TEXT);
REVOKE ALL ON bookmark_search FROM bookmarks_search;
REVOKE ALL ON SCHEMA public FROM bookmarks_search;
-- The role stays: other databases on the server may use it.
