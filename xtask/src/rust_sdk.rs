//! The Rust SDK as an author outside this repository gets it: `cargo package` of
//! `gateway-plugin-sdk`, unpacked into a folder of its own, and `examples/minimal-provider` copied
//! beside it with a manifest of its own (no workspace: the workspace's inherited fields and
//! dependencies written out, the SDK a path dependency on the unpacked crate), built for
//! `wasm32-wasip2` and written into the test plugins directory as `minimal-outside.wasm`, which an
//! e2e test serves (`providers::openai::minimal_example`). A file the package left out, or a
//! path only the workspace resolves, fails here rather than in an author's first build.

use std::path::Path;
use std::process::Command;

use crate::scaffold::{self, Kind, Lang, Sdk};
use crate::{WASM_TARGET, cargo, copy, copy_tree, run, target_dir, workspace_root};

/// The example built from outside, and the file it becomes among the test plugins.
const EXAMPLE: &str = "examples/minimal-provider";
const OUT: &str = "minimal-outside.wasm";

/// Packs the SDK, builds [`EXAMPLE`] against the packed crate in a folder outside the
/// repository, and copies the component into `plugins_dir` as [`OUT`].
pub fn build_outside(plugins_dir: &Path) -> Result<(), String> {
    let root = workspace_root();
    let started = std::time::Instant::now();
    let packages = target_dir().join("sdk-package");
    let mut command = cargo("package");
    command
        .args([
            "-p",
            "gateway-plugin-sdk",
            "--allow-dirty",
            "--no-verify",
            "--quiet",
        ])
        .arg("--target-dir")
        .arg(&packages);
    run(command)?;
    let version = package_version(&root.join("plugin-sdk").join("Cargo.toml"))?;
    let crate_file = packages
        .join("package")
        .join(format!("gateway-plugin-sdk-{version}.crate"));
    forget_builds_of_another_package(&crate_file)?;

    // Outside the repository, so that cargo finds no workspace above the author's project.
    let outside = std::env::temp_dir().join("gateway-sdk-outside-rust");
    let _ = std::fs::remove_dir_all(&outside);
    std::fs::create_dir_all(&outside)
        .map_err(|e| format!("cannot create {}: {e}", outside.display()))?;
    let mut untar = Command::new("tar");
    untar.arg("-xzf").arg(&crate_file).arg("-C").arg(&outside);
    run(untar)?;
    let sdk = outside.join(format!("gateway-plugin-sdk-{version}"));

    let project = outside.join("minimal-provider");
    copy_tree(&root.join(EXAMPLE).join("src"), &project.join("src"))?;
    let manifest = standalone_manifest(&root, &root.join(EXAMPLE).join("Cargo.toml"), &sdk)?;
    write(&project.join("Cargo.toml"), &manifest)?;

    run(outside_cargo(
        &project,
        &["build", "--release", "--quiet", "--target", WASM_TARGET],
    ))?;
    copy(&built("minimal"), &plugins_dir.join(OUT))?;
    eprintln!(
        "xtask: built {EXAMPLE} against the packed gateway-plugin-sdk {version}, outside the repository, in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The projects `gateway plugin new --lang rust` writes, against the same packed SDK: their
    // own tests natively, then the component.
    let started = std::time::Instant::now();
    for kind in Kind::ALL {
        let project = scaffold::project(&outside, Lang::Rust, kind, &Sdk::Path(sdk.clone()))?;
        run(outside_cargo(&project, &["test", "--quiet"])).map_err(|e| {
            format!(
                "the tests of `gateway plugin new --lang rust --kind {}`: {e}",
                kind.as_str()
            )
        })?;
        run(outside_cargo(
            &project,
            &["build", "--release", "--quiet", "--target", WASM_TARGET],
        ))?;
        copy(
            &built(&scaffold::name(Lang::Rust, kind).module()),
            &plugins_dir.join(scaffold::component(Lang::Rust, kind)),
        )?;
    }
    eprintln!(
        "xtask: tested and built the three Rust projects of `gateway plugin new` against the packed SDK in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Empties the outside projects' target directory when `crate_file` is not the package it was
/// built from. `cargo package` gives every file of the crate the same fixed mtime, so cargo
/// cannot tell a changed SDK (a new WIT export) from the last one by its files: the kept build
/// would be linked against the old SDK.
fn forget_builds_of_another_package(crate_file: &Path) -> Result<(), String> {
    let packed = std::fs::read(crate_file)
        .map_err(|e| format!("cannot read {}: {e}", crate_file.display()))?;
    let built_from = target_dir().join("sdk-outside-rust.crate");
    if std::fs::read(&built_from).ok().as_deref() == Some(&packed[..]) {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(target_dir().join("sdk-outside-rust"));
    std::fs::write(&built_from, &packed)
        .map_err(|e| format!("cannot write {}: {e}", built_from.display()))
}

/// `cargo ARGS` on the project at `project`, outside the workspace, its target directory kept
/// in the repository's target so that a second run builds nothing again.
fn outside_cargo(project: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .args(args)
        .arg("--manifest-path")
        .arg(project.join("Cargo.toml"))
        // In the project, as its author runs cargo: its own `.cargo/config.toml` applies, and
        // no configuration of this repository's.
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target_dir().join("sdk-outside-rust"));
    command
}

/// The component a release build of library `library` wrote.
fn built(library: &str) -> std::path::PathBuf {
    target_dir()
        .join("sdk-outside-rust")
        .join(WASM_TARGET)
        .join("release")
        .join(format!("{library}.wasm"))
}

fn package_version(manifest: &Path) -> Result<String, String> {
    let table = read_toml(manifest)?;
    table
        .get("package")
        .and_then(|p| p.get("version"))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{} names no package.version", manifest.display()))
}

/// `example`'s manifest with what it inherits from the workspace written out, the SDK at
/// `sdk`, the workspace's `plugin` profile as its release profile, and an empty `[workspace]`.
fn standalone_manifest(root: &Path, example: &Path, sdk: &Path) -> Result<String, String> {
    let workspace = read_toml(&root.join("Cargo.toml"))?;
    let section = |name: &str| {
        workspace
            .get("workspace")
            .and_then(|w| w.get(name))
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let (fields, dependencies) = (section("package"), section("dependencies"));
    let mut manifest = read_toml(example)?;
    if let Some(package) = manifest
        .get_mut("package")
        .and_then(toml::Value::as_table_mut)
    {
        for (key, value) in package.iter_mut() {
            if inherits(value) {
                *value = fields
                    .get(key)
                    .cloned()
                    .ok_or_else(|| format!("the workspace has no package.{key}"))?;
            }
        }
    }
    if let Some(deps) = manifest
        .get_mut("dependencies")
        .and_then(toml::Value::as_table_mut)
    {
        for (name, spec) in deps.iter_mut() {
            if name == "gateway-plugin-sdk" {
                let mut path = toml::Table::new();
                path.insert("path".into(), sdk.display().to_string().into());
                *spec = path.into();
            } else if inherits(spec) {
                *spec = dependencies
                    .get(name)
                    .cloned()
                    .ok_or_else(|| format!("the workspace has no dependency {name}"))?;
            }
        }
    }
    let mut release = workspace
        .get("profile")
        .and_then(|p| p.get("plugin"))
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    release.remove("inherits");
    let mut profile = toml::Table::new();
    profile.insert("release".into(), release.into());
    manifest.insert("profile".into(), profile.into());
    manifest.insert("workspace".into(), toml::Table::new().into());
    toml::to_string(&manifest).map_err(|e| e.to_string())
}

/// `key.workspace = true`.
fn inherits(value: &toml::Value) -> bool {
    value
        .get("workspace")
        .and_then(toml::Value::as_bool)
        .unwrap_or(false)
}

fn read_toml(path: &Path) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.parse()
        .map_err(|e| format!("{} is not TOML: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_examples_manifest_stands_alone() {
        let root = workspace_root();
        let manifest = standalone_manifest(
            &root,
            &root.join(EXAMPLE).join("Cargo.toml"),
            Path::new("/sdk"),
        )
        .expect("a manifest");
        let table: toml::Table = manifest.parse().expect("TOML");
        assert!(!manifest.contains("workspace = true"), "{manifest}");
        assert_eq!(
            table["dependencies"]["gateway-plugin-sdk"]["path"].as_str(),
            Some("/sdk")
        );
        assert_eq!(table["package"]["edition"].as_str(), Some("2024"));
        assert_eq!(table["profile"]["release"]["panic"].as_str(), Some("abort"));
        assert!(
            table["workspace"]
                .as_table()
                .is_some_and(toml::Table::is_empty)
        );
    }
}
