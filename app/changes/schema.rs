//! Diesel table definitions for the shard's change feed (`migrations/shard/`).

diesel::table! {
    feed_changes (tenant_id, item_id) {
        tenant_id -> Text,
        item_id -> Uuid,
        kind -> Text,
        seq -> BigInt,
        deleted -> Bool,
        changed_at -> Timestamptz,
    }
}

diesel::table! {
    feed_horizons (tenant_id) {
        tenant_id -> Text,
        purged_through -> BigInt,
    }
}
