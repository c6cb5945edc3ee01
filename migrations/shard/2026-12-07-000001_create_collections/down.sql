DROP INDEX bookmarks_in_collection;
ALTER TABLE bookmarks DROP COLUMN collection_id;
DROP TABLE collections;
