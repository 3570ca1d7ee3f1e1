//! Compiled plugins kept on disk, so a restart with unchanged plugins skips
//! compilation (milliseconds to seconds per plugin) and serves at once.
//!
//! An entry's name is the plugin's SHA-256 plus the engine's compatibility
//! hash: a new plugin file, a new wasmtime or different engine settings miss
//! the cache and compile again. Entries are written to a temporary name and
//! renamed, and read into memory (never mapped), so replacing one while
//! another process reads it is safe.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::Component;

/// Why a plugin file could not be made a component.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("not a valid component: {0}")]
    Invalid(wasmtime::Error),
    #[error("compiled plugin unusable: {0}")]
    Unusable(wasmtime::Error),
}

/// Serves every engine: the pool that copies images compiles differently (its own entries).
#[derive(Clone)]
pub(super) struct CompiledCache {
    dir: Arc<PathBuf>,
}

impl CompiledCache {
    pub(super) fn new(dir: &Path) -> CompiledCache {
        CompiledCache {
            dir: Arc::new(dir.to_owned()),
        }
    }

    fn entry(&self, engine: &Engine, wasm_hash: &str) -> PathBuf {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir
            .join(format!("{wasm_hash}-{:016x}.cwasm", hasher.finish()))
    }

    /// The compiled component of the file whose hash is `wasm_hash`, if the cache holds it.
    /// A stale or damaged entry is left to [`CompiledCache::compile`] to replace.
    pub(super) fn load(&self, engine: &Engine, wasm_hash: &str) -> Option<Component> {
        let entry = self.entry(engine, wasm_hash);
        let compiled = std::fs::read(&entry).ok()?;
        // SAFETY: the entry was produced by `precompile_component` of an
        // engine with the same compatibility hash (it is in the file name),
        // in the operator's own cache directory; wasmtime still checks its
        // header and version and refuses anything else.
        match unsafe { Component::deserialize(engine, &compiled) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(entry = %entry.display(),
                    "stale or damaged compiled-plugin cache entry, recompiling: {e}");
                None
            }
        }
    }

    /// Compiles `wasm` and keeps the result. A cache that cannot be written only costs
    /// time.
    pub(super) fn compile(
        &self,
        engine: &Engine,
        wasm_hash: &str,
        wasm: &[u8],
    ) -> Result<Component, CompileError> {
        let entry = self.entry(engine, wasm_hash);
        let compiled = engine
            .precompile_component(wasm)
            .map_err(CompileError::Invalid)?;
        if let Err(e) = self.store(&entry, &compiled) {
            tracing::warn!(dir = %self.dir.display(), "cannot write the compiled-plugin cache: {e}");
        }
        // SAFETY: `compiled` was just produced by this engine.
        unsafe { Component::deserialize(engine, &compiled) }.map_err(CompileError::Unusable)
    }

    fn store(&self, entry: &Path, compiled: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&*self.dir)?;
        let temporary = entry.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&temporary, compiled)?;
        std::fs::rename(&temporary, entry)
    }
}
