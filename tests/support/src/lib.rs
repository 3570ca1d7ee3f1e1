//! What the workspace's tests share, in one place.
//!
//! - Always: [`recording`], the one parser of the recorded provider traffic in
//!   `tests/recordings`, and [`sse`], reading event streams the way a client does.
//! - Feature `plugin`: [`fixtures`] of the plugin SDK's types, for the provider plugins' native
//!   unit tests (which build nothing else of this crate).
//! - Feature `server`: the gateway's integration tests' harness: [`harness`] runs the real
//!   `gateway` binary, [`client`] talks HTTP to it, [`upstream`] fakes the providers behind it,
//!   [`checks`] builds requests and asserts on answers, [`runtime`] calls a plugin without HTTP,
//!   [`probe`] measures the process, [`postgres`] makes test databases, [`redis`] gives each
//!   test a key prefix of its own, [`proxy`] cuts the network to one on demand, [`refused`] runs a `gateway serve` that must refuse to start. The items tests
//!   use most are re-exported here.
//!
//! Test-only: it reads files, panics on anything unexpected and is never a dependency of
//! shipped code (the plugins list it under `[dev-dependencies]`, so their wasm builds skip it).

pub mod recording;
pub mod sse;

#[cfg(feature = "plugin")]
pub mod fixtures;

#[cfg(feature = "server")]
pub mod anthropic_client;
#[cfg(feature = "server")]
pub mod checks;
#[cfg(feature = "server")]
pub mod client;
#[cfg(feature = "server")]
pub mod harness;
#[cfg(feature = "server")]
pub mod mcp;
#[cfg(feature = "server")]
pub mod postgres;
#[cfg(feature = "server")]
pub mod probe;
#[cfg(feature = "server")]
pub mod proxy;
#[cfg(feature = "server")]
pub mod redis;
#[cfg(feature = "server")]
pub mod refused;
#[cfg(feature = "server")]
pub mod runtime;
#[cfg(feature = "server")]
pub mod scrape;
#[cfg(feature = "server")]
pub mod upstream;

pub use recording::{Interaction, Recording};

#[cfg(feature = "server")]
pub use checks::*;
#[cfg(feature = "server")]
pub use client::{Connection, Response, SseResponse};
#[cfg(feature = "server")]
pub use harness::{Gateway, Project, Route, built_plugins_dir};
#[cfg(feature = "server")]
pub use postgres::TestDatabase;
#[cfg(feature = "server")]
pub use proxy::TcpProxy;
#[cfg(feature = "server")]
pub use redis::TestRedis;
#[cfg(feature = "server")]
pub use upstream::{
    AnthropicUpstream, FakeUpstream, GeminiUpstream, OpenAiUpstream, OpenMeteoUpstream,
    ReceivedRequest, Reply, fake_embedding,
};

/// One `#[test]` per recorded case: `name => check(args…);` defines test `name` calling
/// `check(args…)`.
#[macro_export]
macro_rules! recorded_tests {
    ($($test:ident => $check:ident($($arg:expr),+);)*) => {
        $(
            #[test]
            fn $test() {
                $check($($arg),+);
            }
        )*
    };
}
