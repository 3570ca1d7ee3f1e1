//! JavaScript plugins: `cargo xtask plugin js DIR [--out FILE]` builds `DIR/index.js` (or
//! `index.mjs`, `index.ts`) with the SDK of `plugin-sdk-js/` into the component `NAME.wasm`, NAME
//! being the directory's name, in the plugins directory (`target/wasm32-wasip2/plugin`) unless
//! `--out` names the file. The plugin's world is its `package.json`'s `gateway.world` (`provider`,
//! the default, or `tool`: `{"gateway": {"world": "tool"}}`), which the build script reads.
//!
//! The tools are npm packages pinned by `plugin-sdk-js/package-lock.json`: componentize-js (the
//! component, StarlingMonkey), jco (the check that the component does not import `wasi:http`,
//! which the gateway does not link) and rolldown (the bundler: componentize-js takes one ES
//! module; jco depends on rolldown already, so naming it costs no download). `npm ci` installs
//! them into `target/js-tools` once, and again only when the lockfile changes. A plugin is built
//! again only when its sources, the SDK, the WIT or the tools changed (a stamp of their content
//! beside the output).

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{run, target_dir, workspace_root};

/// The JavaScript plugins the test suite loads, by directory; each becomes `<dir name>.wasm`.
const TEST_PLUGINS: &[&str] = &[
    "examples/js-provider",
    "examples/js-tool",
    "tests/plugins/js-hostile",
];

/// The module a plugin's directory is built from: the first of these that exists.
const ENTRIES: &[&str] = &["index.js", "index.mjs", "index.ts"];

/// `cargo xtask plugin js DIR [--out FILE]`.
pub fn command(args: &[String]) -> Result<(), String> {
    let usage = || "usage: cargo xtask plugin js DIR [--out FILE]".to_owned();
    let mut dir = None;
    let mut out = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--out" {
            out = Some(PathBuf::from(rest.next().ok_or_else(usage)?));
        } else if let Some(file) = arg.strip_prefix("--out=") {
            out = Some(PathBuf::from(file));
        } else if dir.is_none() && !arg.starts_with('-') {
            dir = Some(PathBuf::from(arg));
        } else {
            return Err(usage());
        }
    }
    let dir = dir.ok_or_else(usage)?;
    let out = match out {
        Some(out) => out,
        None => plugins_dir().join(format!("{}.wasm", plugin_name(&dir)?)),
    };
    build(&dir, &out)?;
    eprintln!("xtask: wrote {}", out.display());
    Ok(())
}

/// Builds the test suite's JavaScript plugins into `plugins` (the directory `build_plugins`
/// returned) and runs the SDK's own tests (`node --test`).
pub fn build_test_plugins(plugins: &Path) -> Result<(), String> {
    let root = workspace_root();
    for dir in TEST_PLUGINS {
        let dir = root.join(dir);
        build(&dir, &plugins.join(format!("{}.wasm", plugin_name(&dir)?)))?;
    }
    let mut command = Command::new("node");
    command
        .arg("--test")
        .arg("--test-reporter=dot")
        .current_dir(root.join("plugin-sdk-js"));
    run(command).map_err(|e| format!("the JavaScript SDK's tests: {e}"))
}

/// The plugins directory of the cargo-built plugins.
fn plugins_dir() -> PathBuf {
    target_dir().join(crate::WASM_TARGET).join("plugin")
}

/// A plugin's name: its directory's.
fn plugin_name(dir: &Path) -> Result<String, String> {
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("no plugin directory {}: {e}", dir.display()))?;
    dir.file_name()
        .and_then(|name| name.to_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{} has no usable name", dir.display()))
}

/// Builds the plugin in `dir` into `out`, unless `out` was built from the same sources.
pub fn build(dir: &Path, out: &Path) -> Result<(), String> {
    let dir = &dir
        .canonicalize()
        .map_err(|e| format!("no plugin directory {}: {e}", dir.display()))?;
    let root = workspace_root();
    let sdk = root.join("plugin-sdk-js");
    let entry = ENTRIES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| format!("{} has none of {}", dir.display(), ENTRIES.join(", ")))?;
    let name = plugin_name(dir)?;
    let tools = tools(&sdk)?;
    let stamp_file = out.with_extension("wasm.stamp");
    let stamp = stamp_of(&[
        dir,
        &sdk.join("src"),
        &sdk.join("tools"),
        &sdk.join("package-lock.json"),
        &root.join("wit"),
    ])?;
    if out.is_file() && std::fs::read_to_string(&stamp_file).is_ok_and(|kept| kept == stamp) {
        eprintln!("xtask: {} is up to date", out.display());
        return Ok(());
    }
    eprintln!("xtask: building the JavaScript plugin {name} (about a minute)");
    let started = Instant::now();
    let mut command = Command::new("node");
    command
        .arg(tools.join("build.mjs"))
        .arg("--entry")
        .arg(&entry)
        .arg("--sdk")
        .arg(sdk.join("src").join("index.js"))
        .arg("--wit")
        .arg(root.join("wit"))
        .arg("--work")
        .arg(target_dir().join("js-build").join(&name))
        .arg("--out")
        .arg(absolute(out)?);
    run(command)?;
    std::fs::write(&stamp_file, stamp)
        .map_err(|e| format!("cannot write {}: {e}", stamp_file.display()))?;
    eprintln!(
        "xtask: built {} in {:.1} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `path` made absolute against the working directory (the build script runs elsewhere).
fn absolute(path: &Path) -> Result<PathBuf, String> {
    std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The pinned tools in `target/js-tools`, installed with `npm ci` when missing or when the
/// lockfile changed since; the build script is copied beside them (it imports them).
fn tools(sdk: &Path) -> Result<PathBuf, String> {
    let tools = npm_installed(sdk, "js-tools", "the JavaScript tools")?;
    copy(
        &sdk.join("tools").join("build.mjs"),
        &tools.join("build.mjs"),
    )?;
    Ok(tools)
}

/// The upstream MCP server of the handshake era the e2e tests run (`tests/mcp`, the official
/// TypeScript SDK pinned by its lockfile): `target/mcp-node`, with the server copied beside
/// its `node_modules` (an ES module finds its imports from where it is).
pub fn mcp_node() -> Result<PathBuf, String> {
    let sources = workspace_root().join("tests").join("mcp");
    let dir = npm_installed(&sources, "mcp-node", "the MCP test server's packages")?;
    copy(
        &sources.join("legacy_server.mjs"),
        &dir.join("legacy_server.mjs"),
    )?;
    Ok(dir)
}

/// `target/NAME` with the packages of `from`'s `package-lock.json`, installed with `npm ci`
/// when missing or when the lockfile changed since.
fn npm_installed(from: &Path, name: &str, what: &str) -> Result<PathBuf, String> {
    let into = target_dir().join(name);
    let lock = read(&from.join("package-lock.json"))?;
    let installed = into.join("installed.stamp");
    let stamp = format!("{:016x}", hash_bytes(&lock));
    let current = into.join("node_modules").is_dir()
        && std::fs::read_to_string(&installed).is_ok_and(|kept| kept == stamp);
    if !current {
        eprintln!("xtask: installing {what} (npm ci) into {}", into.display());
        std::fs::create_dir_all(&into)
            .map_err(|e| format!("cannot create {}: {e}", into.display()))?;
        for file in ["package.json", "package-lock.json"] {
            copy(&from.join(file), &into.join(file))?;
        }
        let mut command = Command::new("npm");
        command
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&into);
        run(command).map_err(|e| {
            format!(
                "{e}
{what} need Node.js 20 or later with npm on the PATH"
            )
        })?;
        std::fs::write(&installed, stamp)
            .map_err(|e| format!("cannot write {}: {e}", installed.display()))?;
    }
    Ok(into)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// A digest of the names and contents of the files under `paths` (files or directories;
/// `node_modules` and hidden entries left out), in a stable order.
fn stamp_of(paths: &[&Path]) -> Result<String, String> {
    let mut files = Vec::new();
    for path in paths {
        collect(path, &mut files)?;
    }
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in &files {
        hasher.write(file.to_string_lossy().as_bytes());
        hasher.write(&read(file)?);
    }
    Ok(format!(
        "{:016x} over {} files",
        hasher.finish(),
        files.len()
    ))
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    if path.is_file() {
        files.push(path.to_owned());
        return Ok(());
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        collect(&entry.path(), files)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_follows_names_and_contents() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write("index.js", "export const a = 1;");
        write("lib/util.js", "export const b = 2;");
        write("node_modules/x/index.js", "ignored");
        let first = stamp_of(&[dir.path()]).expect("a stamp");
        assert!(first.ends_with("over 2 files"), "{first}");
        assert_eq!(stamp_of(&[dir.path()]).expect("a stamp"), first);
        write("node_modules/x/index.js", "still ignored");
        write(".hidden", "ignored too");
        assert_eq!(stamp_of(&[dir.path()]).expect("a stamp"), first);
        write("lib/util.js", "export const b = 3;");
        assert_ne!(stamp_of(&[dir.path()]).expect("a stamp"), first);
    }

    #[test]
    fn the_test_plugins_exist() {
        let root = workspace_root();
        for dir in TEST_PLUGINS {
            assert!(
                ENTRIES
                    .iter()
                    .any(|entry| root.join(dir).join(entry).is_file()),
                "{dir} has no entry module"
            );
        }
    }
}
