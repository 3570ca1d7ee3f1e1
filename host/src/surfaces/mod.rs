//! API surfaces: one codec per wire format that callers speak. A codec reads
//! its endpoints' bodies into the request [`crate::flow`]'s terms and writes
//! the flow's answers, stream frames and errors in its own shape; the flow
//! does everything else (keys, limits, routes, plugin calls, records).

pub mod anthropic;
mod blocks;
mod checks;
pub mod commonbase;
pub(crate) mod json;
pub mod models;
pub mod openai;
mod parts;
