//! The gateway end to end: the real binary, real plugins, real SQLite files (and PostgreSQL,
//! Redis), fake upstreams replaying recorded provider traffic. One test binary with a module
//! per area (as TensorZero's e2e crate is laid out) rather than one binary per area: each
//! binary links wasmtime in release mode, and linking twenty of them was most of a cold
//! `cargo xtask test`.
//!
//! Run one area with a filter: `cargo xtask test -- routing::`. `cargo xtask test` runs them
//! all twice, on SQLite and then on PostgreSQL (`GATEWAY_TEST_POSTGRES`), leaving out of the
//! second pass the areas that manage their own databases or touch no store
//! (`xtask`'s `NOT_ON_POSTGRES`).

mod admin;
mod anthropic;
mod anthropic_surface;
mod api;
mod azure;
mod bedrock;
mod cache;
mod clients;
mod config;
mod console;
mod cost;
mod gemini;
mod guards;
mod hardening;
mod js_plugins;
mod lifecycle;
mod limits;
mod metrics;
mod openai_surface;
mod parts;
mod plugin_state;
mod prices;
mod project_guards;
mod providers;
mod python_plugins;
mod reasoning;
mod replicas;
mod reports;
mod responses;
mod routing;
mod sandbox;
mod tracing;
mod venv;
mod vertex;
