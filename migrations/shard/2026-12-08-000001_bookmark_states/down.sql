DROP INDEX bookmarks_favorite;
DROP INDEX bookmarks_archived;
DROP INDEX bookmarks_unread;
ALTER TABLE bookmarks
    DROP COLUMN created_by,
    DROP COLUMN favorite,
    DROP COLUMN archived,
    DROP COLUMN unread;
