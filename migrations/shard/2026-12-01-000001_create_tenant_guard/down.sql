DROP TRIGGER bookmarks_tenant_guard ON bookmarks;
DROP FUNCTION _autumn_guard_tenant_write();
DROP TABLE _autumn_move_changes;
DROP TABLE _autumn_tenant_guard;
