//! Python plugins: `cargo xtask plugin python DIR [--out FILE]` builds the plugin in `DIR` into a
//! component with the Python SDK's own build command (`gateway-plugin build`, in
//! `plugin-sdk-python/src/gateway_plugin/build.py`), run from the repository's sources: the
//! repository builds its plugins exactly as an outside author does with the installed package.
//!
//! `DIR/plugin.toml` says what to build: `name` (the component is `NAME.wasm`, the plugin's
//! name in routes; default the directory's name), `world` (`provider`, `guard` or `tool`;
//! default `provider`) and `module` (the Python module defining `WitWorld`; default `app`).
//! Without `--out` the component goes to `DIR/NAME.wasm`.
//!
//! The SDK package ships the WIT it targets (`gateway_plugin/wit`), so that a build needs
//! nothing from this repository; every Python command here first copies the top-level `wit/`'s
//! files there ([`sync_wit`]), so the copy is committed with the change that made it.
//!
//! componentize-py and mypy come from PyPI, pinned ([`PINS`]), into their own environment
//! `target/plugin-sdk-venv`, installed once and again only when a pin changes. componentize-py
//! generates the WIT bindings itself at each build (nothing generated is committed). `cargo
//! xtask test` builds the example plugins and the hostile test plugin into the test plugins
//! directory, skipping each whose sources did not change since its last build (a stamp beside
//! it), runs the SDK's unit tests and type check, and checks the package as an outside author
//! gets it ([`test_installed`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::scaffold::{self, Kind, Lang, Sdk};
use crate::{PIP_INSTALL, run, target_dir, workspace_root};

/// The componentize-py release plugins are built with (PyPI); the SDK's `pyproject.toml` pins
/// the same one, which [`the_pins_agree`](tests) checks. A new pin reinstalls it.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// The type checker of the SDK (PyPI).
pub const MYPY: &str = "mypy==2.4.1";

/// What the SDK's environment holds.
const PINS: &[&str] = &[COMPONENTIZE_PY, MYPY];

/// The plugin [`test_installed`] builds with the installed package, and the name of the
/// component it writes into the test plugins directory (the e2e tests load it).
const OUTSIDE_PLUGIN: (&str, &str) = ("examples/python-provider", "python-provider-outside");

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
    sync_wit()?;
    let python = sdk_python()?;
    build(&python, &dir, &out)
}

/// The SDK's directory.
fn sdk_dir() -> PathBuf {
    workspace_root().join("plugin-sdk-python")
}

/// Copies the top-level `wit/*.wit` into the SDK package (`gateway_plugin/wit`), which ships
/// them, when they differ; a file gone from `wit/` goes from the package too.
pub fn sync_wit() -> Result<(), String> {
    let from = workspace_root().join("wit");
    let to = sdk_dir().join("src").join("gateway_plugin").join("wit");
    std::fs::create_dir_all(&to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    let wit_files = |dir: &Path| -> Result<Vec<PathBuf>, String> {
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.extension().is_some_and(|x| x == "wit") && path.is_file() {
                files.push(path);
            }
        }
        Ok(files)
    };
    for source in wit_files(&from)? {
        let target = to.join(source.file_name().unwrap_or_default());
        let bytes =
            std::fs::read(&source).map_err(|e| format!("cannot read {}: {e}", source.display()))?;
        if std::fs::read(&target).ok().as_deref() != Some(&bytes[..]) {
            std::fs::write(&target, &bytes)
                .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
            eprintln!(
                "xtask: copied {} into {} (commit it)",
                source.display(),
                to.display()
            );
        }
    }
    for kept in wit_files(&to)? {
        if !from.join(kept.file_name().unwrap_or_default()).exists() {
            std::fs::remove_file(&kept)
                .map_err(|e| format!("cannot remove {}: {e}", kept.display()))?;
            eprintln!("xtask: removed {} (gone from wit/)", kept.display());
        }
    }
    Ok(())
}

/// The venv's `python`, with componentize-py and mypy at the pinned versions (installed when
/// missing or stale).
pub fn sdk_python() -> Result<PathBuf, String> {
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
    let pins = PINS.join(" ");
    let installed = std::fs::read_to_string(&pin_file).unwrap_or_default();
    if installed.trim() != pins {
        eprintln!("xtask: installing {pins} into {}", venv.display());
        let mut command = Command::new(&python);
        command.args(PIP_INSTALL).args(PINS);
        run(command)?;
        std::fs::write(&pin_file, &pins)
            .map_err(|e| format!("cannot write {}: {e}", pin_file.display()))?;
    }
    Ok(python)
}

/// Builds the plugin in `dir` to `out` with the SDK's `gateway-plugin build`, run from the
/// repository's sources by the SDK venv's `python` (which has the pinned componentize-py).
pub fn build(python: &Path, dir: &Path, out: &Path) -> Result<(), String> {
    let mut command = Command::new(python);
    command
        .args(["-m", "gateway_plugin", "build"])
        .arg(dir)
        .arg("--out")
        .arg(out)
        .env("PYTHONPATH", sdk_dir().join("src"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run(command).map_err(|e| format!("building the Python plugin in {}: {e}", dir.display()))
}

/// Builds [`TEST_PLUGINS`] into `plugins_dir` (in parallel), each only when its sources, the
/// SDK's, the WIT or the pin changed since its last build there.
pub fn build_for_tests(plugins_dir: &Path) -> Result<(), String> {
    sync_wit()?;
    let root = workspace_root();
    let mut stale = Vec::new();
    for dir in TEST_PLUGINS {
        let dir = root.join(dir);
        let manifest = Manifest::read(&dir)?;
        let out = plugins_dir.join(format!("{}.wasm", manifest.name));
        let stamp = plugins_dir.join(format!(".{}.stamp", manifest.name));
        let fingerprint = fingerprint(&dir)?;
        if !is_current(&out, &stamp, &fingerprint) {
            stale.push((dir, out, stamp, fingerprint));
        }
    }
    if stale.is_empty() {
        eprintln!("xtask: the Python plugins are up to date");
        return Ok(());
    }
    let python = sdk_python()?;
    let started = Instant::now();
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let builds: Vec<_> = stale
            .iter()
            .map(|(dir, out, stamp, fingerprint)| {
                let python = &python;
                scope.spawn(move || {
                    build(python, dir, out)?;
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

/// Whether `out` exists and was built from what `fingerprint` says (its `stamp`).
fn is_current(out: &Path, stamp: &Path, fingerprint: &str) -> bool {
    out.exists() && std::fs::read_to_string(stamp).is_ok_and(|kept| kept.trim() == fingerprint)
}

/// What a test build of the plugin in `dir` depends on: its files, the SDK's (its package
/// metadata too), the WIT and the componentize-py pin, hashed.
fn fingerprint(dir: &Path) -> Result<String, String> {
    let root = workspace_root();
    let mut files = vec![sdk_dir().join("pyproject.toml")];
    for tree in [dir.to_owned(), sdk_dir().join("src"), root.join("wit")] {
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
/// componentize-py's stub bindings of every world; then its type check (mypy, strict, against
/// the same bindings).
pub fn test_sdk() -> Result<(), String> {
    sync_wit()?;
    let python = sdk_python()?;
    let root = workspace_root();
    let stubs = target_dir().join("plugin-sdk-venv").join("stubs");
    let _ = std::fs::remove_dir_all(&stubs);
    let mut command = Command::new(python.with_file_name("componentize-py"));
    command
        .arg("--quiet")
        .arg("-d")
        .arg(root.join("wit"))
        .args(["-w", "provider", "-w", "guard", "-w", "tool", "bindings"])
        .arg(&stubs);
    run(command)?;
    let sdk = sdk_dir();
    let mut command = Command::new(&python);
    let path = std::env::join_paths([&stubs, &sdk.join("src"), &sdk.join("tests")])
        .map_err(|e| e.to_string())?;
    command
        .args(["-m", "unittest", "discover", "--quiet", "-s"])
        .arg(sdk.join("tests"))
        .env("PYTHONPATH", path)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    eprintln!("xtask: the Python SDK's unit tests");
    run(command).map_err(|e| format!("the Python SDK's unit tests: {e}"))?;
    let mypy_path = std::env::join_paths([&stubs, &sdk.join("src")]).map_err(|e| e.to_string())?;
    let mut command = Command::new(&python);
    command
        .args(["-m", "mypy", "--config-file"])
        .arg(sdk.join("pyproject.toml"))
        .args(["--cache-dir"])
        .arg(target_dir().join("plugin-sdk-venv").join("mypy-cache"))
        .args(["-p", "gateway_plugin"])
        .env("MYPYPATH", mypy_path)
        .current_dir(&sdk);
    eprintln!("xtask: the Python SDK's type check (mypy)");
    run(command).map_err(|e| format!("the Python SDK's type check: {e}"))
}

/// The SDK as an outside author gets it, away from this repository: its wheel installed into a
/// fresh virtual environment in a temporary directory, the example provider copied there, built
/// with the installed `gateway-plugin build` into the test plugins directory (as
/// `python-provider-outside.wasm`, which the e2e tests load) and its unit tests run with the
/// installed `gateway_plugin.testing`; then the same for each project `gateway plugin new
/// --lang python` writes (`scaffold-python-KIND.wasm`). Skipped while nothing it depends on changed since it
/// last passed (a stamp beside the component).
pub fn test_installed(plugins_dir: &Path) -> Result<(), String> {
    let (example, name) = OUTSIDE_PLUGIN;
    let example = workspace_root().join(example);
    let out = plugins_dir.join(format!("{name}.wasm"));
    let stamp = plugins_dir.join(format!(".{name}.stamp"));
    // The example and the scaffold's templates: either changed is checked again.
    let fingerprint = fingerprint(&example)? + &scaffold::fingerprint(Lang::Python);
    let scaffolds = Kind::ALL.map(|kind| plugins_dir.join(scaffold::component(Lang::Python, kind)));
    if is_current(&out, &stamp, &fingerprint) && scaffolds.iter().all(|s| s.is_file()) {
        eprintln!("xtask: the installed Python SDK's check is up to date");
        return Ok(());
    }
    sync_wit()?;
    let python = sdk_python()?;
    let started = Instant::now();
    let scratch = std::env::temp_dir().join(format!("gateway-plugin-sdk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let result = installed_check(&python, &scratch, &example, &out, plugins_dir);
    let _ = std::fs::remove_dir_all(&scratch);
    result?;
    std::fs::write(&stamp, fingerprint)
        .map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    eprintln!(
        "xtask: the installed Python SDK built and tested {} in {:.1} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn installed_check(
    python: &Path,
    scratch: &Path,
    example: &Path,
    out: &Path,
    plugins_dir: &Path,
) -> Result<(), String> {
    let dist = scratch.join("dist");
    let venv = scratch.join("venv");
    let plugin = scratch.join("plugin");
    // Run from the scratch directory, and without the caller's Python settings: nothing of the
    // repository may leak in.
    let outside = |program: &Path| {
        let mut command = Command::new(program);
        command
            .current_dir(scratch)
            .env_remove("PYTHONPATH")
            .env_remove("VIRTUAL_ENV")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("GATEWAY_PLUGIN_BINDINGS_DIR", scratch.join("bindings"));
        command
    };
    std::fs::create_dir_all(scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    eprintln!(
        "xtask: the Python SDK's wheel, installed in {}",
        venv.display()
    );
    let mut command = outside(python);
    command
        .args([
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
        ])
        .arg("--wheel-dir")
        .arg(&dist)
        .arg(sdk_dir());
    run(command)?;
    let wheel = std::fs::read_dir(&dist)
        .map_err(|e| format!("cannot read {}: {e}", dist.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| path.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("pip wheel wrote no wheel into {}", dist.display()))?;
    let mut command = outside(Path::new("python3"));
    command.args(["-m", "venv"]).arg(&venv);
    run(command)?;
    let bin = venv.join("bin");
    let mut command = outside(&bin.join("python"));
    command.args(PIP_INSTALL).arg(&wheel);
    run(command)?;
    copy_tree(example, &plugin)?;
    let mut command = outside(&bin.join("gateway-plugin"));
    command.arg("build").arg(&plugin).arg("--out").arg(out);
    run(command).map_err(|e| format!("the installed gateway-plugin build: {e}"))?;
    let head = std::fs::read(out)
        .map(|bytes| bytes.get(..8).map(<[u8]>::to_vec).unwrap_or_default())
        .map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    // `\0asm`, then a component's version and layer (a core module's layer is 0).
    if head != b"\0asm\x0d\x00\x01\x00" {
        return Err(format!("{} is not a WebAssembly component", out.display()));
    }
    let mut command = outside(&bin.join("python"));
    command
        .args(["-m", "unittest", "discover", "--quiet", "-s"])
        .arg(&plugin)
        .current_dir(&plugin);
    run(command).map_err(|e| format!("the example's unit tests with the installed SDK: {e}"))?;
    // The projects `gateway plugin new --lang python` writes, with the same installed SDK:
    // their own tests, then the component, among the test plugins.
    for kind in Kind::ALL {
        let sdk = Sdk::Path(wheel.clone());
        let project = scaffold::project(scratch, Lang::Python, kind, &sdk)?;
        let mut command = outside(&bin.join("python"));
        command
            .args(["-m", "unittest", "--quiet"])
            .current_dir(&project);
        run(command).map_err(|e| {
            format!(
                "the tests of `gateway plugin new --lang python --kind {}`: {e}",
                kind.as_str()
            )
        })?;
        let component = scaffold::component(Lang::Python, kind);
        let mut command = outside(&bin.join("gateway-plugin"));
        command
            .arg("build")
            .arg(&project)
            .arg("--out")
            .arg(plugins_dir.join(&component));
        run(command).map_err(|e| format!("gateway-plugin build of {component}: {e}"))?;
    }
    Ok(())
}

/// Copies the source files under `from` (see [`collect_files`]) to `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    collect_files(from, &mut files)?;
    for file in files {
        let target = to.join(file.strip_prefix(from).map_err(|e| e.to_string())?);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::copy(&file, &target).map_err(|e| {
            format!(
                "cannot copy {} to {}: {e}",
                file.display(),
                target.display()
            )
        })?;
    }
    Ok(())
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

    /// The SDK package's componentize-py is the one the repository builds with.
    #[test]
    fn the_pins_agree() {
        let pyproject = std::fs::read_to_string(sdk_dir().join("pyproject.toml")).expect("read");
        assert!(
            pyproject.contains(&format!("dependencies = [\"{COMPONENTIZE_PY}\"]")),
            "plugin-sdk-python/pyproject.toml must depend on {COMPONENTIZE_PY}"
        );
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
