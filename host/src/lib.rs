//! An LLM inference gateway whose providers are sandboxed WebAssembly plugins.
//!
//! A request flows one way: [`server`] (HTTP transport: accept, dispatch by
//! path) -> [`flow`] (admit: key and body -> route -> cache -> limits -> guards ->
//! plugin call -> answer, whole or streamed -> record), with the endpoint's
//! [`surfaces`] codec reading the body and writing the answer in its wire format.
//! The flow calls the provider plugin through [`plugins`] on the route [`routing`]
//! picks, and ends as one invocation record in the [`store`] (SQLite or PostgreSQL).
//!
//! Shared by those layers: [`state`] (what every request reads, and the config's hot
//! reload), [`http`] (bodies and responses), [`error`] (every failure and its HTTP
//! status), [`auth`] (the key a request carries), [`limits`] (rate limits and budgets),
//! [`cache`] (the response cache), [`pricing`] (what a call cost), [`redact`] (provider
//! keys kept out of answers, records and logs), [`metrics`] and [`traces`]. Around them:
//! [`config`] (the TOML file, checked as it is read), [`cli`] and [`reports`] (its usage
//! reports and record exports). Leaves: [`inflight`] (the bodies in flight), [`redis_link`],
//! [`dir_watch`] (debounced directory watching, behind the hot reloads), [`worker`] (which
//! serving thread runs the code), [`clock`], [`keys`] (what keys are made of), [`glob`],
//! [`encoding`] and [`allocator`] (the process's allocator). Beside the model flow, [`mcp`]
//! serves agents' tool calls (`POST /mcp`) from
//! the MCP servers [`tools`] is the client of. ARCHITECTURE.md has the map and the rules.

// No `unwrap()` or `expect()` outside tests (ARCHITECTURE.md's rule for the request path, held
// for all of the host's code): the few that mean the machine itself failed say so where they
// stand, with an `allow` and its reason.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod access;
pub mod allocator;
pub mod auth;
pub mod batch;
pub mod cache;
pub mod causes;
pub mod cli;
pub mod clock;
pub mod config;
pub mod dir_watch;
pub mod encoding;
pub mod error;
pub mod flow;
pub mod form;
pub mod glob;
pub mod http;
pub mod inflight;
pub mod keys;
pub mod limits;
pub mod mcp;
pub mod metrics;
pub mod plugins;
pub mod pricing;
pub mod redact;
pub mod redis_link;
pub mod reports;
pub mod routing;
pub mod secrets;
pub mod server;
pub mod sso;
pub mod state;
pub mod store;
pub mod surfaces;
pub mod tokenize;
pub mod tools;
pub mod traces;
pub mod worker;
