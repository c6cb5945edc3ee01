DROP FUNCTION _feed_purge(INTERVAL, INTEGER);
DROP TRIGGER feed_horizons_tenant_guard ON feed_horizons;
DROP TRIGGER feed_changes_tenant_guard ON feed_changes;
DROP TRIGGER collections_feed ON collections;
DROP TRIGGER bookmarks_feed ON bookmarks;
DROP FUNCTION _feed_record_change();
DROP FUNCTION _feed_lock(TEXT);
DROP TABLE feed_horizons;
DROP TABLE feed_changes;
