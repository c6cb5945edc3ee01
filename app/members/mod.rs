//! The members feature: a tenant's admins manage its people and their API keys over the
//! API. Members and keys live on the control database (`tenancy::members`,
//! `tenancy::keys`), never on a shard: who may act for a tenant is known before anything is
//! routed. Reading the member list needs any role; every change, and any key listing, needs
//! `admin`.

pub mod api;
mod error;

pub use api::{CODES, TAG, routes};
