//! What happens to a request between its surface and its plugin: who may call (`auth`), where it
//! goes when an upstream fails (`routing`), the response cache, the guards, and the rate limits
//! and budgets it is admitted under (`limits`).

mod auth;
mod cache;
mod guards;
mod limits;
mod routing;
