//! `cargo xtask image`: the container image of `deploy/container/Containerfile`.
//!
//! The gateway is built here, not in the Containerfile, and laid out with the shipped plugins
//! as the image's file system in a build context (`target/image/context`); the Containerfile
//! then only copies it onto `scratch`: nothing to pull and nothing to run in a container, which
//! is all this machine's kernel allows (and an image built in seconds once the gateway is).
//!
//! The gateway is this machine's glibc build with the four libraries it links (libc, libm,
//! libgcc_s and the loader, ~3 MB, as `ldd` finds them) copied beside it, rather than a static
//! musl build: the image is about as small either way, and the musl build served 16% fewer
//! requests a second at saturation for 10% more CPU a request (BENCHMARKS.md, "Issue 54"). The
//! libraries are those the binary was built and tested against: the image needs no
//! distribution's.
//!
//! `cargo xtask image [--profile P] [--engine podman|docker] [--tag NAME] [--context-only]`:
//! the `production` profile by default (as deployed); the first of podman and docker found;
//! tagged `gateway:VERSION` and `gateway:latest`. `cargo xtask image --for-tests`: the tests'
//! image alone, as `cargo xtask test` builds it (below), to run its tests by themselves.
//!
//! For the tests ([`build_for_tests`]): the `release` profile (as the tests' own gateway),
//! built by podman in a store of its own under `target/image/podman`, then the image's
//! configuration (`podman inspect`) and its file system (`podman export`) left in
//! `target/image` for `tests/e2e/operations/deploy.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{PLUGINS, build_plugins, cargo, copy, run, target_dir, workspace_root};

/// The image's user (and group): not root, and no user of a host's (distroless's `nonroot`).
const UID: u32 = 65532;
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `cargo xtask image ARGS`.
pub fn command(args: &[String]) -> Result<(), String> {
    let mut profile = "production".to_owned();
    let mut engine = None;
    let mut tag = format!("gateway:{VERSION}");
    let mut context_only = false;
    if args.iter().any(|arg| arg == "--for-tests") {
        let dir = build_for_tests(&bundled_plugins()?)?;
        eprintln!(
            "xtask: the test image is in {dir}; its tests alone:\n  GATEWAY_TEST_IMAGE={dir} \
             cargo test --release -p gateway --test e2e -- operations::deploy",
            dir = dir.display()
        );
        return Ok(());
    }
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--profile" => profile = value("--profile")?,
            "--engine" => engine = Some(value("--engine")?),
            "--tag" => tag = value("--tag")?,
            "--context-only" => context_only = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: cargo xtask image [--profile P] \
                     [--engine podman|docker] [--tag NAME] [--context-only] | --for-tests"
                ));
            }
        }
    }
    let context = stage(&profile, &bundled_plugins()?)?;
    let containerfile = context.join("Containerfile");
    if context_only {
        eprintln!(
            "xtask: the build context is {}; build it with\n  podman build --format docker -f {} -t {tag} {}",
            context.display(),
            containerfile.display(),
            context.display()
        );
        return Ok(());
    }
    let engine = match engine {
        Some(engine) => engine,
        None => ["podman", "docker"]
            .into_iter()
            .find(|engine| found_program(engine))
            .ok_or("neither podman nor docker was found (or give --context-only)")?
            .to_owned(),
    };
    let mut build = Command::new(&engine);
    build.arg("build");
    build_args(&mut build, &engine, &context, &[&tag, "gateway:latest"]);
    run(build)?;
    eprintln!("xtask: built {tag} with {engine}");
    Ok(())
}

/// The bundled plugins, built; their directory.
fn bundled_plugins() -> Result<PathBuf, String> {
    build_plugins(PLUGINS.iter().filter(|plugin| plugin.bundled))
}

/// Builds the image for the e2e tests with podman in a store under `target/image/podman`, with
/// the plugins already built in `plugins` (`cargo xtask test` builds them all first: a second
/// build of the bundled ones would build three of them again), and leaves its configuration
/// (`inspect.json`) and file system (`rootfs.tar`) in the directory returned (`target/image`).
pub fn build_for_tests(plugins: &Path) -> Result<PathBuf, String> {
    let context = stage("release", plugins)?;
    let dir = target_dir().join("image");
    let store = dir.join("podman");
    let podman = || {
        let mut command = Command::new("podman");
        command
            .arg("--root")
            .arg(store.join("root"))
            .arg("--runroot")
            .arg(store.join("run"))
            // vfs: layers as plain directories, where the kernel refuses overlay mounts.
            .args(["--storage-driver", "vfs"]);
        command
    };
    let tag = format!("localhost/gateway-test:{VERSION}");
    let mut build = podman();
    build.args(["build", "--quiet"]);
    build_args(&mut build, "podman", &context, &[&tag]);
    run(build)?;
    let inspect = podman()
        .args(["image", "inspect", &tag])
        .output()
        .map_err(|e| format!("cannot run podman image inspect: {e}"))?;
    if !inspect.status.success() {
        return Err(format!(
            "podman image inspect: {}",
            String::from_utf8_lossy(&inspect.stderr)
        ));
    }
    write(&dir.join("inspect.json"), &inspect.stdout)?;
    // A container made (not run: this kernel refuses that) for its file system.
    let name = "gateway-test-export";
    let _ = podman().args(["rm", "--force", name]).output();
    let mut create = podman();
    create.args([
        "create",
        "--quiet",
        "--no-healthcheck",
        "--name",
        name,
        &tag,
    ]);
    run(create)?;
    let mut export = podman();
    export
        .args(["export", "--output"])
        .arg(dir.join("rootfs.tar"))
        .arg(name);
    let exported = run(export);
    let _ = podman().args(["rm", "--force", name]).output();
    // What the tests read is out; the store keeps nothing from run to run (vfs copies every
    // layer whole).
    let _ = podman().args(["rmi", "--force", &tag]).output();
    exported?;
    Ok(dir)
}

/// `build`'s arguments after `build`: the Containerfile, the labels' values, the tags and the
/// context.
fn build_args(build: &mut Command, engine: &str, context: &Path, tags: &[&str]) {
    // Docker's format keeps HEALTHCHECK, which OCI's image config has no field for.
    if engine.ends_with("podman") {
        build.args(["--format", "docker"]);
    }
    build
        .arg("--file")
        .arg(context.join("Containerfile"))
        .args(["--build-arg", &format!("VERSION={VERSION}")])
        .args([
            "--build-arg",
            &format!("REVISION={}", git(&["rev-parse", "HEAD"])),
        ])
        .args([
            "--build-arg",
            &format!("SOURCE={}", git(&["remote", "get-url", "origin"])),
        ]);
    for tag in tags {
        build.args(["--tag", tag]);
    }
    build.arg(context);
}

/// What `git ARGS` prints in the workspace, or "" when it cannot say.
fn git(args: &[&str]) -> String {
    Command::new("git")
        .arg("-C")
        .arg(workspace_root())
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Builds the gateway (`profile`) and lays out the build context with the bundled plugins
/// built in `plugins`: `Containerfile`, `rootfs/` (what the image holds, root's) and `data/`
/// (its `/var/lib/gateway`, the gateway user's).
fn stage(profile: &str, plugins: &Path) -> Result<PathBuf, String> {
    let mut build = cargo("build");
    build.args(["--profile", profile, "-p", "gateway"]);
    run(build)?;

    let context = target_dir().join("image").join("context");
    if context.exists() {
        std::fs::remove_dir_all(&context)
            .map_err(|e| format!("cannot remove {}: {e}", context.display()))?;
    }
    let rootfs = context.join("rootfs");
    for dir in [
        "usr/bin",
        "usr/lib/gateway/plugins",
        "etc/gateway",
        "etc/ssl/certs",
        // The parents of /var/lib/gateway, root's like the rest.
        "var/lib",
    ] {
        create_dir(&rootfs.join(dir))?;
    }
    create_dir(&context.join("data"))?;
    let root = workspace_root();
    copy(
        &root.join("deploy/container/Containerfile"),
        &context.join("Containerfile"),
    )?;
    let built = target_dir()
        .join(if profile == "dev" { "debug" } else { profile })
        .join("gateway");
    let gateway = rootfs.join("usr/bin/gateway");
    copy(&built, &gateway)?;
    // The symbol table is a tenth of the binary and serves only a debugger; a panic still says
    // where. Stripped here rather than by the profile, whose change would rebuild every crate
    // (and bench and perf want the symbols).
    let mut strip = Command::new("strip");
    strip.arg("--strip-all").arg(&gateway);
    run(strip).map_err(|e| format!("{e} (strip is binutils', beside gcc)"))?;
    for library in libraries(&built)? {
        let inside = rootfs.join(library.strip_prefix("/").unwrap_or(&library));
        if let Some(dir) = inside.parent() {
            create_dir(dir)?;
        }
        // The file a link names, under the link's name: the loader looks the name up.
        let file = std::fs::canonicalize(&library)
            .map_err(|e| format!("cannot resolve {}: {e}", library.display()))?;
        copy(&file, &inside)?;
    }
    for plugin in PLUGINS.iter().filter(|plugin| plugin.bundled) {
        let file = format!("{}.wasm", plugin.file);
        copy(
            &plugins.join(&file),
            &rootfs.join("usr/lib/gateway/plugins").join(&file),
        )?;
    }
    copy(
        &root.join("deploy/container/gateway.toml"),
        &rootfs.join("etc/gateway/gateway.toml"),
    )?;
    // This machine's bundle (Debian's ca-certificates): rustls-platform-verifier reads it
    // where Debian keeps it, as on the machine the gateway was tested on.
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if !bundle.exists() {
        return Err(format!(
            "{} is missing: install Debian's ca-certificates",
            bundle.display()
        ));
    }
    copy(bundle, &rootfs.join("etc/ssl/certs/ca-certificates.crt"))?;
    // Host names from /etc/hosts, then DNS (glibc's own modules, inside libc since 2.34).
    write(&rootfs.join("etc/nsswitch.conf"), b"hosts: files dns\n")?;
    // Names for the ids, for `ps` and file listings; no shell, no password.
    write(
        &rootfs.join("etc/passwd"),
        format!(
            "root:x:0:0:root:/root:/sbin/nologin\n\
             gateway:x:{UID}:{UID}:gateway:/var/lib/gateway:/sbin/nologin\n"
        )
        .as_bytes(),
    )?;
    write(
        &rootfs.join("etc/group"),
        format!("root:x:0:\ngateway:x:{UID}:\n").as_bytes(),
    )?;
    Ok(context)
}

/// The shared libraries `binary` loads, its loader first, as `ldd` finds them on this machine.
fn libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("cannot run ldd (glibc's): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ldd {}: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut libraries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)`, `/lib64/ld-linux-x86-64.so.2
        // (0x...)`, and the kernel's `linux-vdso.so.1 (0x...)`, which is no file.
        let path = match line.split_once("=>") {
            Some((_, found)) => found.trim(),
            None => line.trim(),
        };
        let path = path.split(" (").next().unwrap_or_default();
        if path.starts_with('/') {
            libraries.push(PathBuf::from(path));
        } else if line.contains("not found") {
            return Err(format!("ldd {}: {line}", binary.display()));
        }
    }
    libraries.sort_by_key(|path| !path.to_string_lossy().contains("ld-linux"));
    Ok(libraries)
}

fn found_program(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

fn create_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
