//! An LLM inference gateway whose providers are sandboxed WebAssembly plugins.
//!
//! A request flows one way: [`server`] (HTTP) -> [`auth`] -> [`api`]
//! (validation) -> [`routing`] -> [`plugins`] (the provider plugin) -> response,
//! and ends as one invocation record in the [`store`].
//!
//! Around it: [`config`] (the TOML file, checked as it is read, and its hot
//! reload), [`dir_watch`] (debounced directory watching, behind the config's and
//! the plugins' hot reload), [`pricing`] (what a call cost) and [`cli`].

pub mod api;
pub mod auth;
pub mod cli;
pub mod config;
pub mod dir_watch;
pub mod error;
pub mod plugins;
pub mod pricing;
pub mod redact;
pub mod routing;
pub mod server;
pub mod store;
pub mod worker;
