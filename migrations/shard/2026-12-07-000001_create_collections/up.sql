-- Collections: a tenant's folders, nested up to 8 deep, on the tenant's shard beside its
-- bookmarks. A bookmark is in at most one collection.
--
-- Every key leads with tenant_id and every reference is a composite foreign key on
-- (tenant_id, …): a row can only point at a row of its own tenant, whatever a handler
-- sends, and a tenant's rows always move together.
--
-- The foreign keys are DEFERRABLE, INITIALLY IMMEDIATE: the application's statements are
-- checked as they run, while the mover's transactions check them at commit (a catch-up
-- round replaces rows by key, deleting a parent and inserting it again while its children
-- stay). They are ON DELETE NO ACTION, not CASCADE: a cascade would delete children that
-- such a round is not replacing, and a handler must say what happens to a collection's
-- contents (`?with_contents=true`) rather than lose them by accident.
CREATE TABLE collections (
    tenant_id  TEXT        NOT NULL,
    id         UUID        NOT NULL,
    name       TEXT        NOT NULL,
    parent_id  UUID,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT collections_parent FOREIGN KEY (tenant_id, parent_id)
        REFERENCES collections (tenant_id, id) DEFERRABLE INITIALLY IMMEDIATE,
    CONSTRAINT collections_not_own_parent CHECK (parent_id IS DISTINCT FROM id),
    CONSTRAINT collections_name_length CHECK (char_length(name) BETWEEN 1 AND 100)
);

-- Names are unique among siblings, ignoring case (top-level collections are siblings).
-- Leading with (tenant_id, parent_id), it also serves listing a collection's children and
-- the foreign key's check when a collection is deleted.
CREATE UNIQUE INDEX collections_sibling_name
    ON collections (tenant_id, parent_id, lower(name)) NULLS NOT DISTINCT;

ALTER TABLE bookmarks
    ADD COLUMN collection_id UUID,
    ADD CONSTRAINT bookmarks_collection FOREIGN KEY (tenant_id, collection_id)
        REFERENCES collections (tenant_id, id) DEFERRABLE INITIALLY IMMEDIATE;

-- A collection's bookmarks newest first, and the foreign key's check when a collection is
-- deleted. Partial: most bookmarks are in no collection.
CREATE INDEX bookmarks_in_collection ON bookmarks (tenant_id, collection_id, id DESC)
    WHERE collection_id IS NOT NULL;

-- Moves capture and fence collections as they do bookmarks.
CREATE TRIGGER collections_tenant_guard
    AFTER INSERT OR UPDATE OR DELETE ON collections
    FOR EACH ROW
    WHEN (coalesce(current_setting('autumn.move_bypass', true), '') = '')
    EXECUTE FUNCTION _autumn_guard_tenant_write('tenant_id', 'id');
