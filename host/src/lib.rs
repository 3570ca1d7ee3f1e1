//! An LLM inference gateway whose providers are sandboxed WebAssembly plugins.
//!
//! A request flows one way: [`server`] (HTTP) -> [`auth`] -> [`api`]
//! (validation) -> [`routing`] -> [`plugins`] (the provider plugin) -> response,
//! and ends as one invocation record in the [`store`].

pub mod api;
pub mod auth;
pub mod cli;
pub mod config;
pub mod error;
pub mod plugins;
pub mod pricing;
pub mod redact;
pub mod reload;
pub mod routing;
pub mod server;
pub mod store;
pub mod watch;
pub mod worker;
