//! Python plugins: `cargo xtask plugin python DIR [--out FILE]` builds the plugin in `DIR` into a
//! component with componentize-py, against the top-level `wit/` and the SDK in
//! `plugin-sdk-python/src`.
//!
//! `DIR/plugin.toml` says what to build: `name` (the component is `NAME.wasm`, the plugin's
//! name in routes; default the directory's name), `world` (`provider`, `guard` or `tool`;
//! default `provider`) and `module` (the Python module defining `WitWorld`; default `app`).
//! Without `--out` the component goes to `DIR/NAME.wasm`.
//!
//! componentize-py comes from PyPI, pinned ([`COMPONENTIZE_PY`]), into its own environment
//! `target/plugin-sdk-venv`, installed once and again only when the pin changes. It generates
//! the WIT bindings itself at each build (nothing generated is committed). `cargo xtask test`
//! builds the example plugins and the hostile test plugin into the test plugins directory,
//! skipping each whose sources did not change since its last build (a stamp beside it), and
//! runs the SDK's unit tests.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{run, target_dir, workspace_root};

/// The componentize-py release plugins are built with (PyPI). A new pin reinstalls it.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// The Python plugins `cargo xtask test` builds into the test plugins directory.
pub const TEST_PLUGINS: &[&str] = &[
    "examples/python-provider",
    "examples/python-guard",
    "examples/python-tool",
    "tests/plugins/python-hostile",
];

/// What `plugin.toml` says of a plugin.
#[derive(Debug, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub world: String,
    pub module: String,
}

impl Manifest {
    /// `dir/plugin.toml`, with the defaults for what it leaves out (or for a missing file).
    pub fn read(dir: &Path) -> Result<Manifest, String> {
        let path = dir.join("plugin.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let fallback = dir
            .canonicalize()
            .ok()
            .and_then(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "plugin".to_owned());
        Manifest::parse(&text, &fallback).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn parse(text: &str, fallback_name: &str) -> Result<Manifest, String> {
        let table: toml::Table = text.parse().map_err(|e| format!("invalid TOML: {e}"))?;
        let mut manifest = Manifest {
            name: fallback_name.to_owned(),
            world: "provider".to_owned(),
            module: "app".to_owned(),
        };
        for (key, value) in &table {
            let value = value
                .as_str()
                .ok_or_else(|| format!("`{key}` must be a string"))?;
            match key.as_str() {
                "name" => manifest.name = value.to_owned(),
                "world" => manifest.world = value.to_owned(),
                "module" => manifest.module = value.to_owned(),
                other => return Err(format!("unknown key `{other}` (name, world, module)")),
            }
        }
        if !matches!(manifest.world.as_str(), "provider" | "guard" | "tool") {
            return Err(format!(
                "world `{}`: the gateway's worlds are `provider`, `guard` and `tool`",
                manifest.world
            ));
        }
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !plain(&manifest.name) {
            return Err(format!(
                "name `{}`: letters, digits, `-` and `_` only (it names NAME.wasm)",
                manifest.name
            ));
        }
        Ok(manifest)
    }
}

/// `cargo xtask plugin python DIR [--out FILE]`.
pub fn command(args: &[String]) -> Result<(), String> {
    const USAGE: &str = "usage: cargo xtask plugin python DIR [--out FILE]";
    let mut dir = None;
    let mut out = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--out" {
            out = Some(PathBuf::from(rest.next().ok_or(USAGE)?));
        } else if let Some(file) = arg.strip_prefix("--out=") {
            out = Some(PathBuf::from(file));
        } else if dir.is_none() && !arg.starts_with('-') {
            dir = Some(PathBuf::from(arg));
        } else {
            return Err(USAGE.into());
        }
    }
    let dir = dir.ok_or(USAGE)?;
    let manifest = Manifest::read(&dir)?;
    let out = out.unwrap_or_else(|| dir.join(format!("{}.wasm", manifest.name)));
    let componentize = componentize_py()?;
    build(&componentize, &dir, &manifest, &out)
}

/// The venv's `componentize-py`, installed at the pinned version when missing or stale.
pub fn componentize_py() -> Result<PathBuf, String> {
    let venv = target_dir().join("plugin-sdk-venv");
    let bin = venv.join("bin");
    let python = bin.join("python");
    let pin_file = venv.join("componentize-py.pin");
    if !python.exists() {
        eprintln!("xtask: creating {} (once)", venv.display());
        let mut command = Command::new("python3");
        command.args(["-m", "venv"]).arg(&venv);
        run(command).map_err(|e| {
            format!("{e}\nPython plugins need Python 3 with its venv module (`python3 -m venv`)")
        })?;
    }
    let installed = std::fs::read_to_string(&pin_file).unwrap_or_default();
    if installed.trim() != COMPONENTIZE_PY {
        eprintln!(
            "xtask: installing {COMPONENTIZE_PY} into {}",
            venv.display()
        );
        let mut command = Command::new(&python);
        command
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(COMPONENTIZE_PY);
        run(command)?;
        std::fs::write(&pin_file, COMPONENTIZE_PY)
            .map_err(|e| format!("cannot write {}: {e}", pin_file.display()))?;
    }
    Ok(bin.join("componentize-py"))
}

/// Builds the plugin in `dir` to `out` (written to a temporary name, then renamed, so a gateway
/// watching the directory never loads half a file).
pub fn build(
    componentize: &Path,
    dir: &Path,
    manifest: &Manifest,
    out: &Path,
) -> Result<(), String> {
    let root = workspace_root();
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let file_name = out
        .file_name()
        .ok_or_else(|| format!("{} names no file", out.display()))?;
    let temporary = out.with_file_name(format!(".{}.tmp", file_name.to_string_lossy()));
    let started = Instant::now();
    let mut command = Command::new(componentize);
    command
        .arg("--quiet")
        .arg("-d")
        .arg(root.join("wit"))
        .args(["-w", &manifest.world])
        .arg("componentize")
        .arg(&manifest.module)
        .arg("-p")
        .arg(dir)
        .arg("-p")
        .arg(root.join("plugin-sdk-python").join("src"))
        .arg("-o")
        .arg(&temporary)
        // Only the two paths above: not the caller's virtual environment's packages.
        .env_remove("VIRTUAL_ENV");
    run(command).map_err(|e| format!("building the Python plugin in {}: {e}", dir.display()))?;
    std::fs::rename(&temporary, out).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            temporary.display(),
            out.display()
        )
    })?;
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "xtask: built {} ({} world, {:.1} MB) in {:.1} s",
        out.display(),
        manifest.world,
        size as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Builds [`TEST_PLUGINS`] into `plugins_dir` (in parallel), each only when its sources, the
/// SDK's, the WIT or the pin changed since its last build there.
pub fn build_for_tests(plugins_dir: &Path) -> Result<(), String> {
    let root = workspace_root();
    let mut stale = Vec::new();
    for dir in TEST_PLUGINS {
        let dir = root.join(dir);
        let manifest = Manifest::read(&dir)?;
        let out = plugins_dir.join(format!("{}.wasm", manifest.name));
        let stamp = plugins_dir.join(format!(".{}.stamp", manifest.name));
        let fingerprint = fingerprint(&dir)?;
        let current = out.exists()
            && std::fs::read_to_string(&stamp).is_ok_and(|kept| kept.trim() == fingerprint);
        if !current {
            stale.push((dir, manifest, out, stamp, fingerprint));
        }
    }
    if stale.is_empty() {
        eprintln!("xtask: the Python plugins are up to date");
        return Ok(());
    }
    let componentize = componentize_py()?;
    let started = Instant::now();
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let builds: Vec<_> = stale
            .iter()
            .map(|(dir, manifest, out, stamp, fingerprint)| {
                let componentize = &componentize;
                scope.spawn(move || {
                    build(componentize, dir, manifest, out)?;
                    std::fs::write(stamp, fingerprint)
                        .map_err(|e| format!("cannot write {}: {e}", stamp.display()))
                })
            })
            .collect();
        builds
            .into_iter()
            .map(|build| {
                build
                    .join()
                    .unwrap_or_else(|_| Err("a build thread panicked".into()))
            })
            .collect()
    });
    eprintln!(
        "xtask: {} Python plugin(s) built in {:.1} s",
        stale.len(),
        started.elapsed().as_secs_f64()
    );
    results.into_iter().collect()
}

/// What a test build of the plugin in `dir` depends on: its files, the SDK's, the WIT and the
/// componentize-py pin, hashed.
fn fingerprint(dir: &Path) -> Result<String, String> {
    let root = workspace_root();
    let mut files = Vec::new();
    for tree in [
        dir.to_owned(),
        root.join("plugin-sdk-python").join("src"),
        root.join("wit"),
    ] {
        collect_files(&tree, &mut files)?;
    }
    files.sort();
    let mut hasher = DefaultHasher::new();
    COMPONENTIZE_PY.hash(&mut hasher);
    for file in files {
        let bytes =
            std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        file.strip_prefix(&root).unwrap_or(&file).hash(&mut hasher);
        bytes.hash(&mut hasher);
    }
    Ok(format!("{:016x}", hasher.finish()))
}

/// The source files under `dir`: what a build reads (not caches, not built components).
fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "__pycache__" || name.ends_with(".wasm") {
            continue;
        }
        // `metadata` follows symlinks (plugin-sdk/wit is one).
        if std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            collect_files(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// The SDK's unit tests (`plugin-sdk-python/tests`), natively with the venv's Python against
/// componentize-py's stub bindings of every world.
pub fn test_sdk() -> Result<(), String> {
    let componentize = componentize_py()?;
    let root = workspace_root();
    let stubs = target_dir().join("plugin-sdk-venv").join("stubs");
    let _ = std::fs::remove_dir_all(&stubs);
    let mut command = Command::new(&componentize);
    command
        .arg("--quiet")
        .arg("-d")
        .arg(root.join("wit"))
        .args(["-w", "provider", "-w", "guard", "-w", "tool", "bindings"])
        .arg(&stubs);
    run(command)?;
    let sdk = root.join("plugin-sdk-python");
    let python = componentize.with_file_name("python");
    let mut command = Command::new(python);
    let path = std::env::join_paths([stubs, sdk.join("src"), sdk.join("tests")])
        .map_err(|e| e.to_string())?;
    command
        .args(["-m", "unittest", "discover", "--quiet", "-s"])
        .arg(sdk.join("tests"))
        .env("PYTHONPATH", path)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    eprintln!("xtask: the Python SDK's unit tests");
    run(command).map_err(|e| format!("the Python SDK's unit tests: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_defaults_and_checks() {
        assert_eq!(
            Manifest::parse("", "my-plugin"),
            Ok(Manifest {
                name: "my-plugin".into(),
                world: "provider".into(),
                module: "app".into()
            })
        );
        let guard = Manifest::parse("name = \"g\"\nworld = \"guard\"\nmodule = \"main\"", "x");
        assert_eq!(
            guard.map(|m| (m.name, m.world, m.module)),
            Ok(("g".into(), "guard".into(), "main".into()))
        );
        let tool = Manifest::parse("world = \"tool\"", "x");
        assert_eq!(tool.map(|m| m.world), Ok("tool".into()));
        assert!(Manifest::parse("world = \"proxy\"", "x").is_err());
        assert!(Manifest::parse("nmae = \"x\"", "x").is_err());
        assert!(Manifest::parse("name = \"../x\"", "x").is_err());
        assert!(Manifest::parse("name = 1", "x").is_err());
    }

    /// Every test plugin has a manifest that reads, and the names `cargo xtask test` builds
    /// are the ones the e2e tests load.
    #[test]
    fn the_test_plugins_read() {
        let names: Vec<String> = TEST_PLUGINS
            .iter()
            .map(|dir| Manifest::read(&workspace_root().join(dir)).map(|m| m.name))
            .collect::<Result<_, _>>()
            .expect("manifests");
        assert_eq!(
            names,
            [
                "python-provider",
                "python-guard",
                "python-tool",
                "python-hostile"
            ]
        );
    }
}
