//! Diesel table definition for the shard's `collections` (`migrations/shard/`).

diesel::table! {
    collections (tenant_id, id) {
        tenant_id -> Text,
        id -> Uuid,
        name -> Text,
        parent_id -> Nullable<Uuid>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}
