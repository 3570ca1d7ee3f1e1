//! The public JSON API: request bodies, their validation, response bodies.

pub mod request;
pub mod response;
pub mod variables;
