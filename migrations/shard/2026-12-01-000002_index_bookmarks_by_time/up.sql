-- The admin page's cross-shard browse reads every tenant's bookmarks newest first,
-- `(created_at, id) < ($1, $2) ORDER BY created_at DESC, id DESC LIMIT n`, on each shard
-- and merges the pages. This index serves that as a short range scan, whatever the
-- shard's size.
CREATE INDEX bookmarks_created_at_id ON bookmarks (created_at DESC, id DESC);
