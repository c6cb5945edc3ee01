-- Reading states and authorship. Each ADD COLUMN has a constant default, so Postgres
-- records it in the catalog instead of rewriting the table: the migration takes a brief
-- lock on a shard of any size rather than copying it.
--
-- created_by is the member who saved the bookmark. Members live on the control database,
-- so no foreign key can hold it: it is a record of who acted, kept when the member is
-- disabled, and null for bookmarks saved before members existed or by trusted callers
-- that act for no member.
ALTER TABLE bookmarks
    ADD COLUMN unread     BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN archived   BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN favorite   BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN created_by UUID;

-- The state filters, newest first. Partial: a state is set on a minority of a tenant's
-- bookmarks, and the index holds only those (`?unread=false` and the like scan the
-- primary key, as an unfiltered page does).
CREATE INDEX bookmarks_unread ON bookmarks (tenant_id, id DESC) WHERE unread;
CREATE INDEX bookmarks_archived ON bookmarks (tenant_id, id DESC) WHERE archived;
CREATE INDEX bookmarks_favorite ON bookmarks (tenant_id, id DESC) WHERE favorite;
