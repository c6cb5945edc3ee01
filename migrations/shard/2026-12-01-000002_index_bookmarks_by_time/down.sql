DROP INDEX bookmarks_created_at_id;
