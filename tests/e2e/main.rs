//! The gateway end to end: the real binary, real plugins, real SQLite files (and PostgreSQL,
//! Redis), fake upstreams replaying recorded provider traffic. One test binary with a module
//! per area (as TensorZero's e2e crate is laid out) rather than one binary per area: each
//! binary links wasmtime in release mode, and linking twenty of them was most of a cold
//! `cargo xtask test`.
//!
//! The areas are grouped by what they test:
//!
//! - `surfaces`: the wire formats callers speak (`commonbase`, `openai`, `anthropic`,
//!   `responses`, content `parts`) and the official Python SDKs against them (`clients`);
//! - `providers`: each provider plugin against its recorded upstream (`openai`, `azure`,
//!   `anthropic`, `bedrock`, `gemini`, `vertex`) and `reasoning` mapped to each;
//! - `flow`: a request between surface and plugin (`auth`, `routing`, `cache`, `guards`,
//!   `limits`);
//! - `plugins`: the `sandbox`, `failures`, plugin `state`, `python` and `js` plugins,
//!   `lifecycle`;
//! - `accounting`: `invocations` records, `cost`, `prices`, `reports`;
//! - `operations`: `cli`, `config`, `admin`, `console`, `project_guards`, `project_tools`,
//!   `metrics`, `tracing`, `replicas`;
//! - `hardening`: what a hostile caller or a careless client finds.
//!
//! A test's name is its module path, so a filter runs one group, one area or one concern:
//! `cargo xtask test -p gateway --test e2e -- flow::routing::` (or `providers::`,
//! `surfaces::openai::errors::`). `cargo xtask test` runs them all twice, on SQLite and then on
//! PostgreSQL (`GATEWAY_TEST_POSTGRES`), leaving out of the second pass the areas that manage
//! their own databases or touch no store (`xtask`'s `NOT_ON_POSTGRES`).

mod accounting;
mod common;
mod flow;
mod hardening;
mod operations;
mod plugins;
mod providers;
mod surfaces;
mod venv;
