//! What must hold without any database: the key→slot contract, topology validation,
//! routing rules, tenant resolution, the command line as a user runs it, the docs, and the
//! repository's own hygiene.

mod api_document;
mod architecture;
mod cli;
mod docs;
mod repository;
mod routing;
mod slot_contract;
mod tenancy;
mod topology_config;
