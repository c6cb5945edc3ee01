//! The service against real Postgres: servers in containers shared by every test of this
//! binary (control, shard0 with a streaming replica, shard1), a fresh set of databases per
//! test, and the real application spawned on a free port (`support::TestApp`). One module
//! per area.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod admin;
mod auth;
mod batch;
mod changes;
mod collections;
mod cutover;
mod directory;
mod drained;
mod edge_headers;
mod export;
mod failed_credentials;
mod fairness;
mod imports;
mod leaving;
mod load_generator;
mod members;
mod moves;
mod openapi;
mod outages;
mod partitions;
mod pools;
mod range_moves;
mod replica_reads;
mod row_security;
mod search;
mod secrets;
mod service;
mod states;
