//! The one integration-test binary (as ripgrep has): every area is a module, so the
//! crate, rdkafka and the ClickHouse client are linked once, and `common` holds the
//! fixtures and the harness every area shares. Each test still gets its own database and
//! topic prefix (`common::TestEnv`), so tests run in parallel threads.

mod common;
mod notifier_support;
mod writer_support;

mod alerts_resolved;
mod api;
mod api_contract;
mod api_roles;
mod assembler;
mod bad_input;
mod bounds;
mod broker_tls;
mod cli;
mod cluster;
mod demo;
mod explore_cli;
mod explore_reads;
mod explore_web;
mod fidelity;
mod fuzz_replay;
mod ingest;
mod ingest_auth;
mod ingest_backlog;
mod ingest_clients;
mod ingest_limits;
mod logminer;
mod logminer_commands;
mod logminer_freeze;
mod logminer_merges;
mod logminer_shapes;
mod logminer_store;
mod mine_cli;
mod mine_loghub;
mod mine_props;
mod notifier;
mod notifier_formats;
mod notifier_process;
mod notifier_silences;
mod packed;
mod replicas;
mod retry;
mod shapes_web;
mod soak;
mod store;
mod store_tls;
mod tidy;
mod tls;
mod web;
mod writer;
mod writer_chdb;
mod writer_outage;
mod writer_process;
mod writer_tokens;
