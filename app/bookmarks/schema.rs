//! Diesel table definitions for the shard schema (`migrations/shard/`).

diesel::table! {
    bookmarks (tenant_id, id) {
        tenant_id -> Text,
        id -> Uuid,
        url -> Text,
        title -> Text,
        notes -> Text,
        tags -> Array<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        collection_id -> Nullable<Uuid>,
        unread -> Bool,
        archived -> Bool,
        favorite -> Bool,
        created_by -> Nullable<Uuid>,
    }
}
