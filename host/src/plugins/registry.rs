//! The plugin files the runtime knows: loading one (compile, link, check its
//! WIT version, ask its `info`), swapping it in, unloading it, and the status
//! of each for `gateway plugins list` and `GET /admin/plugins`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use uuid::Uuid;
use wasmtime::component::Component;

use super::cache::CompileError;
use super::engine::LinkError;
use super::failure::Failure;
use super::imports::new_store;
use super::plugin::Plugin;
use super::stats::StatsByPlugin;
use super::wit::{VersionError, WorldKind, wit_version};
use super::{CallContext, PluginRuntime};

/// Why a plugin file was not loaded (the previous version, if any, keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the file name is not UTF-8")]
    FileName,
    #[error("cannot read the plugins directory: {0}")]
    Dir(std::io::Error),
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("compilation task failed: {0}")]
    Task(tokio::task::JoinError),
    #[error(transparent)]
    Version(#[from] VersionError),
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("cannot be instantiated: {0}")]
    Instantiate(wasmtime::Error),
    #[error("its info call failed: {0}")]
    Info(Failure),
}

/// A route's plugin that is not loaded: no such file in the plugins directory, or it did not
/// load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLoaded {
    pub route: String,
    pub plugin: String,
}

/// A version of a plugin file that is not serving (yet): being compiled, or refused.
#[derive(Clone)]
struct Attempt {
    /// The file's SHA-256, hex; `None` when it could not be read.
    hash: Option<String>,
    since_ms: i64,
    /// `None` while it loads; then why it was refused.
    refused: Option<String>,
}

struct Slot {
    file: PathBuf,
    serving: Option<Arc<Plugin>>,
    /// The last version that did not become the serving one: loading now, or refused.
    attempt: Option<Attempt>,
    /// The file is gone; its routes answer 503.
    removed: bool,
}

/// The version of a plugin file that is not serving: in [`PluginReport::next`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct NextVersion {
    /// `loading` (being compiled and checked) or `refused` (see `reason`).
    pub status: String,
    pub hash: Option<String>,
    /// Since when it loads, or when it was refused.
    pub since: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A row of `gateway plugins list` and `GET /admin/plugins`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PluginReport {
    pub plugin: String,
    pub name: Option<String>,
    pub version: Option<String>,
    pub wit_version: Option<String>,
    /// `provider`, `guard` or `tool`, once loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    pub file: String,
    pub hash: Option<String>,
    pub loaded_at: Option<String>,
    /// `serving`; `loading` (its first version is being compiled); `rejected` (no version
    /// serves: see `reason`); `removed` (the file is gone).
    pub status: String,
    pub reason: Option<String>,
    /// While a version serves: a newer file being loaded, or refused (the serving one stays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NextVersion>,
}

/// Every plugin file seen, by name.
#[derive(Default)]
pub(super) struct Registry {
    slots: RwLock<HashMap<String, Slot>>,
    pub(super) stats: StatsByPlugin,
}

impl Registry {
    pub(super) fn get(&self, name: &str) -> Option<Arc<Plugin>> {
        self.slots
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .and_then(|slot| slot.serving.clone())
    }

    /// Every plugin serving now.
    pub(super) fn serving(&self) -> Vec<Arc<Plugin>> {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        slots
            .values()
            .filter_map(|slot| slot.serving.clone())
            .collect()
    }

    /// Serves `moved` (the same plugins, in a new pool) instead of their old selves.
    pub(super) fn replace_moved(&self, moved: Vec<Arc<Plugin>>) {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        for plugin in moved {
            // A plugin (re)loaded meanwhile stays: it is newer.
            if let Some(slot) = slots.get_mut(&*plugin.name)
                && slot.serving.as_ref().is_some_and(|s| s.hash == plugin.hash)
            {
                slot.serving = Some(plugin);
            }
        }
    }

    /// The serving version of a file, if its bytes are unchanged (a no-op reload, or a file
    /// put back after a refused one).
    fn unchanged(&self, name: &str, hash: &str) -> Option<Arc<Plugin>> {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        let slot = slots.get_mut(name)?;
        let plugin = slot.serving.clone()?;
        if slot.removed || plugin.hash != hash {
            return None;
        }
        slot.attempt = None;
        Some(plugin)
    }

    /// A version of `file` (`hash`, when it could be read) starts loading.
    fn loading(&self, name: &str, file: &Path, hash: Option<&str>) {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        let slot = slots.entry(name.to_owned()).or_insert_with(|| Slot {
            file: file.to_owned(),
            serving: None,
            attempt: None,
            removed: false,
        });
        slot.file = file.to_owned();
        slot.removed = false;
        slot.attempt = Some(Attempt {
            hash: hash.map(str::to_owned),
            since_ms: crate::clock::now_ms(),
            refused: None,
        });
    }

    /// Keeps the outcome of loading `file` (after [`Registry::loading`]): a plugin swapped
    /// in, or why not.
    fn record(
        &self,
        name: &str,
        file: &Path,
        result: Result<Arc<Plugin>, LoadError>,
        took: std::time::Duration,
    ) -> Result<Arc<Plugin>, LoadError> {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        let Some(slot) = slots.get_mut(name) else {
            return result;
        };
        match result {
            Ok(plugin) => {
                tracing::info!(plugin = %name, name = %plugin.info.name,
                    version = %plugin.info.version, wit = %plugin.wit_version,
                    file = %file.display(), load_ms = took.as_millis() as u64, "plugin loaded");
                slot.serving = Some(plugin.clone());
                slot.attempt = None;
                Ok(plugin)
            }
            Err(reason) => {
                tracing::error!(plugin = %name, file = %file.display(),
                    serving_previous = slot.serving.is_some(), "plugin rejected: {reason}");
                if let Some(attempt) = &mut slot.attempt {
                    attempt.refused = Some(reason.to_string());
                    attempt.since_ms = crate::clock::now_ms();
                }
                Err(reason)
            }
        }
    }

    fn unload(&self, file: &Path) {
        let Ok(name) = plugin_name(file) else { return };
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get_mut(&*name)
            && slot.file == file
        {
            tracing::warn!(plugin = %name, file = %file.display(), "plugin removed: its routes answer 503");
            slot.removed = true;
            slot.serving = None;
            slot.attempt = None;
        }
    }

    fn report(&self) -> Vec<PluginReport> {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<PluginReport> = slots
            .iter()
            .map(|(name, slot)| {
                let serving = slot.serving.as_ref();
                let attempt = slot.attempt.as_ref();
                let refused = attempt.and_then(|a| a.refused.clone());
                let (status, reason) = match (slot.removed, serving, attempt) {
                    (true, _, _) => ("removed", None),
                    (false, Some(_), _) => ("serving", None),
                    (false, None, Some(a)) if a.refused.is_none() => ("loading", None),
                    (false, None, _) => ("rejected", refused),
                };
                let next = attempt.filter(|_| serving.is_some()).map(|a| NextVersion {
                    status: if a.refused.is_some() {
                        "refused"
                    } else {
                        "loading"
                    }
                    .to_owned(),
                    hash: a.hash.clone(),
                    since: crate::clock::format_time_ms(a.since_ms),
                    reason: a.refused.clone(),
                });
                PluginReport {
                    plugin: name.clone(),
                    name: serving.map(|p| p.info.name.clone()),
                    version: serving.map(|p| p.info.version.clone()),
                    wit_version: serving.map(|p| p.wit_version.clone()),
                    world: serving.map(|p| p.world().to_owned()),
                    file: slot.file.display().to_string(),
                    hash: serving.map(|p| p.hash.clone()),
                    loaded_at: serving.map(|p| crate::clock::format_time_ms(p.loaded_at_ms)),
                    status: status.to_owned(),
                    reason,
                    next,
                }
            })
            .collect();
        rows.sort_by(|a, b| a.plugin.cmp(&b.plugin));
        rows
    }
}

impl PluginRuntime {
    /// Loads every `*.wasm` in `dir`; returns the names loaded and the files rejected with why.
    pub async fn load_dir(&self, dir: &Path) -> (Vec<String>, Vec<(PathBuf, LoadError)>) {
        let mut loaded = Vec::new();
        let mut rejected = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                rejected.push((dir.to_owned(), LoadError::Dir(e)));
                return (loaded, rejected);
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
            .collect();
        files.sort();
        for file in files {
            match self.load(&file).await {
                Ok(plugin) => loaded.push(plugin.name.to_string()),
                Err(reason) => rejected.push((file, reason)),
            }
        }
        // Compiling leaves tens of MiB of freed heap behind.
        crate::allocator::release_heap();
        (loaded, rejected)
    }

    /// Loads (or reloads) one plugin file: compiles, links and validates it
    /// (its `info` must answer), then swaps it in. Requests already running
    /// finish on the version they started with. On failure the previous
    /// version keeps serving and the reason is kept in the plugin's status.
    pub async fn load(&self, file: &Path) -> Result<Arc<Plugin>, LoadError> {
        let name = plugin_name(file)?;
        let started = std::time::Instant::now();
        let result = match std::fs::read(file) {
            Ok(bytes) => {
                let hash = crate::encoding::sha256_hex(&bytes);
                if let Some(plugin) = self.registry.unchanged(&name, &hash) {
                    return Ok(plugin);
                }
                self.registry.loading(&name, file, Some(&hash));
                self.prepare(&name, file, bytes, hash).await
            }
            Err(e) => {
                self.registry.loading(&name, file, None);
                Err(LoadError::Read(e))
            }
        };
        self.registry.stats.loaded(&name, result.is_ok());
        self.registry.record(&name, file, result, started.elapsed())
    }

    /// The plugin's file is gone: stop serving it.
    pub fn unload(&self, file: &Path) {
        self.registry.unload(file);
    }

    /// The serving version of plugin `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Plugin>> {
        self.registry.get(name)
    }

    /// The serving version of `plugin`, which route `route` is served by.
    pub fn for_route(&self, route: &str, plugin: &str) -> Result<Arc<Plugin>, NotLoaded> {
        self.get(plugin)
            .filter(|plugin| plugin.kind() == WorldKind::Provider)
            .ok_or_else(|| NotLoaded {
                route: route.to_owned(),
                plugin: plugin.to_owned(),
            })
    }

    /// The guard plugin `plugin` of guard `guard`, if it is loaded (and is a guard).
    pub fn for_guard(&self, plugin: &str) -> Option<Arc<Plugin>> {
        self.get(plugin)
            .filter(|plugin| plugin.kind() == WorldKind::Guard)
    }

    /// The tool plugin `plugin`, if it is loaded (and is a tool plugin).
    pub fn for_tool(&self, plugin: &str) -> Option<Arc<Plugin>> {
        self.get(plugin)
            .filter(|plugin| plugin.kind() == WorldKind::Tool)
    }

    /// Every plugin file the runtime has seen, by name.
    pub fn report(&self) -> Vec<PluginReport> {
        self.registry.report()
    }

    async fn prepare(
        &self,
        name: &Arc<str>,
        file: &Path,
        bytes: Vec<u8>,
        hash: String,
    ) -> Result<Arc<Plugin>, LoadError> {
        let pool = self.engines.current();
        let engine = pool.engine.clone();
        let cache = self.cache.clone();
        let key = hash.clone();
        let (plugin, shown) = (name.clone(), file.display().to_string());
        // Compiling takes milliseconds to seconds of CPU (tens of seconds for a Python or
        // JavaScript plugin, whose interpreter is in it): keep it off the async workers, and
        // say so in the log, since the plugin's routes wait for it.
        let component = tokio::task::spawn_blocking(move || {
            compile(&engine, cache.as_ref(), &key, &bytes, || {
                tracing::info!(plugin = %plugin, file = %shown, bytes = bytes.len(),
                    "plugin compiling: until it loads, its routes keep the version serving, or answer 503");
            })
            .inspect(|(_, took)| {
                if let Some(took) = took {
                    tracing::info!(plugin = %plugin, file = %shown,
                        compile_ms = took.as_millis() as u64, "plugin compiled");
                }
            })
        })
        .await
        .map_err(LoadError::Task)??
        .0;
        let wit_version = wit_version(&component, &pool.engine)?;
        let linked = pool.link(&component)?;

        let mut store = new_store(
            &pool.engine,
            name,
            &CallContext {
                invocation_id: Uuid::nil(),
                route: Arc::from(""),
                sandbox: self.offline.clone(),
                secrets: Default::default(),
                trace: Default::default(),
                trace_headers: None,
            },
            None,
            // `info` keeps nothing for later requests.
            &Arc::default(),
        );
        let info = match linked
            .info(&mut store)
            .await
            .map_err(LoadError::Instantiate)?
        {
            Ok(info) => info,
            Err(e) => return Err(LoadError::Info(Failure::of(&e, store.data()))),
        };
        Ok(Arc::new(Plugin {
            name: name.clone(),
            file: file.to_owned(),
            hash,
            wit_version,
            loaded_at_ms: crate::clock::now_ms(),
            info,
            prepared: super::prepared::Prepared::new(
                &linked,
                name,
                &self.registry.stats.of(name),
                self.preparer.ends(),
            ),
            linked,
            engine: pool.engine.clone(),
            stats: self.registry.stats.of(name),
        }))
    }

    /// Compiles `plugin` once more, on a thread of its own and one core, for the pool whose
    /// instances copy their memory image: its instances made ahead are made there once that
    /// is done (`prepared`). Until then, or if it fails (logged), they are made in the
    /// request pool as before.
    pub(super) fn compile_copying(&self, plugin: &Plugin) {
        let pool = self.engines.copying().clone();
        let cache = self.cache.clone();
        let (name, file, hash) = (
            plugin.name.clone(),
            plugin.file.clone(),
            plugin.hash.clone(),
        );
        let copying = plugin.prepared.copying().clone();
        // A thread of its own, not the async runtime's blocking pool: the runtime waits for
        // those as it shuts down, and this compilation is of no use to a gateway stopping.
        let compiling = std::thread::Builder::new().name("plugin-compile".into());
        let started = compiling.spawn(move || {
            let linked = std::fs::read(&file)
                .map_err(|e| e.to_string())
                // A new version is on its way to being loaded, which will ask for its own.
                .and_then(|wasm| match crate::encoding::sha256_hex(&wasm) == hash {
                    true => Ok(wasm),
                    false => Err("the file changed since it was loaded".to_owned()),
                })
                .and_then(|wasm| {
                    compile(&pool.engine, cache.as_ref(), &hash, &wasm, || {
                        tracing::info!(plugin = %name, bytes = wasm.len(),
                            "plugin compiling for instances made ahead (their memory image \
                             copied in); until then they map it");
                    })
                    .map_err(|e| e.to_string())
                })
                .and_then(|(component, took)| {
                    let linked = pool.link(&component).map_err(|e| e.to_string())?;
                    Ok((linked, took))
                });
            match linked {
                Ok((linked, took)) => {
                    copying.compiled(linked);
                    tracing::info!(plugin = %name,
                        compile_ms = took.map_or(0, |took| took.as_millis() as u64),
                        "plugin compiled for instances made ahead (their memory image copied in)");
                }
                Err(e) => tracing::warn!(plugin = %name,
                    "could not compile the plugin for instances made ahead with their memory \
                     image copied in; they map it, as other instances do: {e}"),
            }
        });
        if let Err(e) = started {
            tracing::warn!(plugin = %plugin.name,
                "could not start compiling the plugin for instances made ahead: {e}");
        }
    }
}

/// `wasm` (whose SHA-256 is `hash`) compiled for `engine`, and how long that took; from the
/// cache when it holds it (no time). `compiling` is called first when it does not.
fn compile(
    engine: &wasmtime::Engine,
    cache: Option<&super::cache::CompiledCache>,
    hash: &str,
    wasm: &[u8],
    compiling: impl FnOnce(),
) -> Result<(Component, Option<std::time::Duration>), CompileError> {
    if let Some(component) = cache.and_then(|c| c.load(engine, hash)) {
        return Ok((component, None));
    }
    compiling();
    let started = std::time::Instant::now();
    let component = match cache {
        Some(cache) => cache.compile(engine, hash, wasm),
        None => Component::new(engine, wasm).map_err(CompileError::Invalid),
    }?;
    Ok((component, Some(started.elapsed())))
}

/// A plugin's name: its file stem.
fn plugin_name(file: &Path) -> Result<Arc<str>, LoadError> {
    file.file_stem()
        .and_then(|stem| stem.to_str())
        .map(Arc::from)
        .ok_or(LoadError::FileName)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(registry: &Registry, name: &str) -> PluginReport {
        registry
            .report()
            .into_iter()
            .find(|row| row.plugin == name)
            .expect("a row")
    }

    #[test]
    fn a_first_version_is_loading_then_rejected_then_removed() {
        let registry = Registry::default();
        let file = Path::new("/plugins/p.wasm");
        registry.loading("p", file, Some("abc"));
        let loading = row(&registry, "p");
        assert_eq!(
            (loading.status.as_str(), loading.next.is_none()),
            ("loading", true)
        );

        let refused = registry.record(
            "p",
            file,
            Err(LoadError::FileName),
            std::time::Duration::ZERO,
        );
        assert!(refused.is_err());
        let rejected = row(&registry, "p");
        assert_eq!(rejected.status, "rejected");
        assert_eq!(
            rejected.reason.as_deref(),
            Some("the file name is not UTF-8")
        );
        assert!(
            rejected.next.is_none(),
            "nothing serves: no next version to tell apart"
        );

        registry.unload(file);
        let removed = row(&registry, "p");
        assert_eq!((removed.status.as_str(), removed.reason), ("removed", None));
    }
}
