//! A loaded plugin: what the registry hands the engine and each instance.

use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::Engine;

use super::stats::PluginStats;
use super::types::PluginInfo;
use super::wit::{Linked, WorldKind};

/// A plugin ready to serve: compiled and linked.
pub struct Plugin {
    /// The file stem routes refer to.
    pub name: Arc<str>,
    pub file: PathBuf,
    /// SHA-256 of the file, hex.
    pub hash: String,
    /// The `gateway:provider` version the plugin was built against.
    pub wit_version: String,
    pub loaded_at_ms: i64,
    pub info: PluginInfo,
    pub(super) linked: Linked,
    /// The engine (and instance pool) `linked` belongs to.
    pub(super) engine: Engine,
    /// Its instances made ahead of calls, when instantiating it is slow.
    pub(super) prepared: Arc<super::prepared::Prepared>,
    /// The metrics' counters of this plugin's name (shared by its versions).
    pub(super) stats: Arc<PluginStats>,
}

impl Plugin {
    /// The world it serves.
    pub fn kind(&self) -> WorldKind {
        self.linked.world()
    }

    /// The world it serves, as listings name it: `provider`, `guard` or `tool`.
    pub fn world(&self) -> &'static str {
        self.kind().name()
    }
}
