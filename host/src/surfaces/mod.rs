//! API surfaces: one codec per wire format that callers speak. A codec reads
//! its endpoints' bodies into the request [`crate::flow`]'s terms and writes
//! the flow's answers, stream frames and errors in its own shape; the flow
//! does everything else (keys, limits, routes, plugin calls, records).
//!
//! The codecs are [`commonbase`], [`openai`] (its `responses` the Responses API),
//! [`anthropic`] and [`gemini`]; each reads model names through the config's aliases and
//! `ROUTE/MODEL`.
//! What they share is written once: `json` reads every body (the admin API's too), `parts`
//! the content parts in OpenAI's shape, `checks` the value checks, `blocks` the stream state
//! of answers written one block at a time, `batch_lines` what both batch APIs check and keep
//! of a batch's requests; [`models`] answers `GET /v1/models`.

pub mod anthropic;
mod batch_lines;
mod blocks;
pub(crate) mod checks;
pub mod commonbase;
pub mod gemini;
pub(crate) mod json;
pub mod models;
pub mod openai;
mod parts;
