//! JavaScript plugins: `cargo xtask plugin js DIR [--out FILE]` builds `DIR/index.js` (or
//! `index.mjs`, `index.ts`) with the SDK of `plugin-sdk-js/` into the component `NAME.wasm`, NAME
//! being the directory's name, in the plugins directory (`target/wasm32-wasip2/plugin`) unless
//! `--out` names the file. It runs the SDK's own command, `gateway-plugin build`
//! (`plugin-sdk-js/bin/gateway-plugin.mjs`, what an author runs with `npx`), so the build has one
//! implementation. The plugin's world is its `package.json`'s `gateway.world` (`provider`, the
//! default, `tool` or `guard`: `{"gateway": {"world": "tool"}}`).
//!
//! The tools are npm packages pinned by `plugin-sdk-js/package-lock.json`: componentize-js (the
//! component, StarlingMonkey), jco (the check that the component does not import `wasi:http`,
//! which the gateway does not link; the TypeScript declarations generated from the WIT) and
//! rolldown (the bundler), the package's dependencies, and TypeScript, its development one. `npm
//! ci` installs them into `target/js-tools` once, and again only when the lockfile changes; the
//! package's files are staged beside them before each use (the command imports the tools from
//! where it is), with the repository's `wit/` as the package's WIT. A plugin is built again only
//! when its sources, the SDK, the WIT or the tools changed (a stamp of their content in the
//! build's folder, `target/js-build/NAME`, not beside the output).
//!
//! `cargo xtask test` also checks the SDK as its users get it: the WIT copy and the declarations
//! generated from it are current, the declarations and a typed use of them pass `tsc --strict`,
//! its tests pass, and the packed package, installed into a folder outside the repository, builds
//! and tests `examples/js-provider` there (`outside_author`).

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::scaffold::{self, Kind, Lang, Sdk};
use crate::{copy, copy_tree, run, target_dir, workspace_root};

/// The JavaScript plugins the test suite loads, by directory; each becomes `<dir name>.wasm`.
const TEST_PLUGINS: &[&str] = &[
    "examples/js-provider",
    "examples/js-tool",
    "examples/js-guard",
    "tests/plugins/js-hostile",
];

/// The module a plugin's directory is built from: the first of these that exists (as the SDK's
/// command looks for them).
const ENTRIES: &[&str] = &["index.js", "index.mjs", "index.ts"];

/// The package's files the build and the checks run from, staged beside the installed tools.
const STAGED: &[&str] = &["package.json", "bin", "src", "tools"];

/// The example an outside author's copy is made of, and the component it is built into.
const OUTSIDE_EXAMPLE: &str = "examples/js-provider";
const OUTSIDE_PLUGIN: &str = "js-provider-outside.wasm";

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
/// returned), checks the SDK's generated declarations and types, runs its own tests
/// (`node --test`), and builds and tests the example as an outside author would
/// ([`outside_author`]), which also writes `js-provider-outside.wasm` into `plugins`.
pub fn build_test_plugins(plugins: &Path) -> Result<(), String> {
    let root = workspace_root();
    for dir in TEST_PLUGINS {
        let dir = root.join(dir);
        build(&dir, &plugins.join(format!("{}.wasm", plugin_name(&dir)?)))?;
    }
    let sdk = root.join("plugin-sdk-js");
    let tools = tools(&sdk)?;
    check_types(&sdk, &tools)?;
    let mut command = Command::new("node");
    command
        .arg("--test")
        .arg("--test-reporter=dot")
        .current_dir(&sdk);
    run(command).map_err(|e| format!("the JavaScript SDK's tests: {e}"))?;
    outside_author(&sdk, plugins)
}

/// [`outside_author`] alone (`cargo xtask outside js`).
pub fn check_outside(plugins: &Path) -> Result<(), String> {
    outside_author(&workspace_root().join("plugin-sdk-js"), plugins)
}

/// The declarations generated from the WIT are the committed ones (and the package's WIT copy
/// the repository's), and the declarations with a typed author's use of them (`test/
/// types-check.ts`) pass `tsc --strict`.
fn check_types(sdk: &Path, tools: &Path) -> Result<(), String> {
    let mut command = Command::new("node");
    command
        .arg(tools.join("tools").join("wit.mjs"))
        .arg("check")
        .arg("--package")
        .arg(sdk)
        .arg("--wit")
        .arg(workspace_root().join("wit"));
    run(command).map_err(|e| format!("the JavaScript SDK's WIT declarations: {e}"))?;
    let mut command = Command::new("node");
    command
        .arg(
            tools
                .join("node_modules")
                .join("typescript")
                .join("bin")
                .join("tsc"),
        )
        .args(["--noEmit", "--strict", "-p"])
        .arg(sdk.join("test").join("tsconfig.json"));
    run(command).map_err(|e| format!("the JavaScript SDK's types (tsc): {e}"))
}

/// What an author outside the repository does with the SDK: `npm pack` it, install the tarball
/// into a copy of `examples/js-provider` in a temporary folder (the tools from the registry, as
/// the lockfile's ranges allow), build it there with `npx gateway-plugin build`, and run its
/// tests with `node --test` and `gateway-plugin-sdk/testing`. The component is copied into
/// `plugins` as `js-provider-outside.wasm` for the e2e tests; then the same for each project
/// `gateway plugin new --lang js` writes (`scaffold-js-KIND.wasm`). Skipped while the SDK and the
/// example are those of the last successful check (a stamp in `target/js-outside`).
fn outside_author(sdk: &Path, plugins: &Path) -> Result<(), String> {
    let root = workspace_root();
    let example = root.join(OUTSIDE_EXAMPLE);
    let kept = target_dir().join("js-outside");
    let stamp_file = kept.join("checked.stamp");
    let stamp = stamp_of(&[
        &example,
        &sdk.join("package.json"),
        &sdk.join("package-lock.json"),
        &sdk.join("bin"),
        &sdk.join("src"),
        &sdk.join("tools"),
        &sdk.join("types"),
        &sdk.join("wit"),
    ])? + &scaffold::fingerprint(Lang::Js);
    // The example's component and the scaffold's, kept beside the stamp.
    let mut built: Vec<String> = vec![OUTSIDE_PLUGIN.to_owned()];
    built.extend(Kind::ALL.map(|kind| scaffold::component(Lang::Js, kind)));
    let all_kept = built.iter().all(|file| kept.join(file).is_file());
    if all_kept && std::fs::read_to_string(&stamp_file).is_ok_and(|k| k == stamp) {
        eprintln!("xtask: the packed JavaScript SDK was checked outside the repository already");
        for file in &built {
            copy(&kept.join(file), &plugins.join(file))?;
        }
        return Ok(());
    }
    let started = Instant::now();
    let folder = std::env::temp_dir().join(format!("gateway-js-outside-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    let project = folder.join("js-provider");
    std::fs::create_dir_all(&project)
        .map_err(|e| format!("cannot create {}: {e}", project.display()))?;
    eprintln!(
        "xtask: checking the packed JavaScript SDK in {}",
        folder.display()
    );
    let mut command = npm(sdk, &["pack", "--loglevel=error", "--pack-destination"]);
    command.arg(&folder);
    run(command).map_err(|e| format!("npm pack of the JavaScript SDK: {e}"))?;
    let tarball = std::fs::read_dir(&folder)
        .map_err(|e| format!("cannot read {}: {e}", folder.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "tgz"))
        .ok_or_else(|| format!("npm pack wrote no tarball into {}", folder.display()))?;
    for file in ["index.js", "package.json"] {
        copy(&example.join(file), &project.join(file))?;
    }
    std::fs::create_dir_all(project.join("test"))
        .map_err(|e| format!("cannot create {}: {e}", project.join("test").display()))?;
    for entry in std::fs::read_dir(example.join("test"))
        .map_err(|e| format!("cannot read {}/test: {e}", example.display()))?
    {
        let path = entry.map_err(|e| e.to_string())?.path();
        copy(
            &path,
            &project
                .join("test")
                .join(path.file_name().unwrap_or_default()),
        )?;
    }
    let dependency = format!("dependencies.gateway-plugin-sdk=file:{}", tarball.display());
    run(npm(&project, &["pkg", "set", &dependency]))?;
    run(npm(
        &project,
        &["install", "--no-audit", "--no-fund", "--loglevel=error"],
    ))
    .map_err(|e| format!("npm install of the packed JavaScript SDK: {e}"))?;
    let out = folder.join(OUTSIDE_PLUGIN);
    let mut build = Command::new("npx");
    build
        .args(["gateway-plugin", "build", "."])
        .arg("--out")
        .arg(&out)
        .current_dir(&project);
    run(build).map_err(|e| format!("npx gateway-plugin build, outside the repository: {e}"))?;
    let mut test = Command::new("node");
    test.args(["--test", "--test-reporter=dot", "test/"])
        .current_dir(&project);
    run(test).map_err(|e| format!("the example's tests, outside the repository: {e}"))?;
    // The projects `gateway plugin new --lang js` writes, with the SDK as the command gives it
    // from a checkout (its folder; the example above had the tarball): installed, their own
    // tests, then the component.
    for kind in Kind::ALL {
        let project = scaffold::project(&folder, Lang::Js, kind, &Sdk::Path(sdk.to_owned()))?;
        let component = scaffold::component(Lang::Js, kind);
        run(npm(
            &project,
            &["install", "--no-audit", "--no-fund", "--loglevel=error"],
        ))
        .map_err(|e| format!("npm install in {component}: {e}"))?;
        run(npm(&project, &["test", "--silent"])).map_err(|e| {
            format!(
                "the tests of `gateway plugin new --lang js --kind {}`: {e}",
                kind.as_str()
            )
        })?;
        run(npm(&project, &["run", "build", "--silent"]))
            .map_err(|e| format!("npm run build in {component}: {e}"))?;
        copy(&project.join(&component), &folder.join(&component))?;
    }
    std::fs::create_dir_all(&kept).map_err(|e| format!("cannot create {}: {e}", kept.display()))?;
    for file in &built {
        copy(&folder.join(file), &kept.join(file))?;
        copy(&folder.join(file), &plugins.join(file))?;
    }
    std::fs::write(&stamp_file, stamp)
        .map_err(|e| format!("cannot write {}: {e}", stamp_file.display()))?;
    // Kept when a step failed, for a look at what the author would have seen.
    let _ = std::fs::remove_dir_all(&folder);
    eprintln!(
        "xtask: the packed JavaScript SDK built and tested the example outside the repository in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `npm ARGS` in `dir`.
fn npm(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("npm");
    command.args(args).current_dir(dir);
    command
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
    if !ENTRIES.iter().any(|name| dir.join(name).is_file()) {
        return Err(format!(
            "{} has none of {}",
            dir.display(),
            ENTRIES.join(", ")
        ));
    }
    let name = plugin_name(dir)?;
    let tools = tools(&sdk)?;
    // Kept in the build's own folder, not beside `out`: a plugins directory holds plugins.
    let work = target_dir().join("js-build").join(&name);
    let out = absolute(out)?;
    let stamp_file = work.join(format!(
        "{:016x}.stamp",
        hash_bytes(out.as_os_str().as_encoded_bytes())
    ));
    let stamp = stamp_of(&[
        dir,
        &sdk.join("bin"),
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
        .arg(tools.join("bin").join("gateway-plugin.mjs"))
        .arg("build")
        .arg(dir)
        .arg("--out")
        .arg(&out)
        .arg("--work")
        .arg(&work);
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
/// lockfile changed since, with the package's files staged beside them (its command imports
/// them from where it is) and the repository's WIT as the package's.
fn tools(sdk: &Path) -> Result<PathBuf, String> {
    let tools = npm_installed(sdk, "js-tools", "the JavaScript tools")?;
    for name in STAGED {
        let staged = tools.join(name);
        if staged.is_dir() {
            std::fs::remove_dir_all(&staged)
                .map_err(|e| format!("cannot remove {}: {e}", staged.display()))?;
        }
        copy_tree(&sdk.join(name), &staged)?;
    }
    let wit = tools.join("wit");
    let _ = std::fs::remove_dir_all(&wit);
    std::fs::create_dir_all(&wit).map_err(|e| format!("cannot create {}: {e}", wit.display()))?;
    let root_wit = workspace_root().join("wit");
    for entry in std::fs::read_dir(&root_wit)
        .map_err(|e| format!("cannot read {}: {e}", root_wit.display()))?
    {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|ext| ext == "wit") {
            copy(&path, &wit.join(path.file_name().unwrap_or_default()))?;
        }
    }
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

/// The OpenID provider the single sign-on tests run (`tests/oidc`, `oidc-provider` pinned by its
/// lockfile): `target/oidc-node`, with the provider's script beside its `node_modules`.
pub fn oidc_node() -> Result<PathBuf, String> {
    let sources = workspace_root().join("tests").join("oidc");
    let dir = npm_installed(&sources, "oidc-node", "the OpenID test provider's packages")?;
    copy(&sources.join("idp.mjs"), &dir.join("idp.mjs"))?;
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
        let command = npm(
            &into,
            &["ci", "--no-audit", "--no-fund", "--loglevel=error"],
        );
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
