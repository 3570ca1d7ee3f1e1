//! `cargo xtask`: the project's two everyday commands, so a fresh clone needs
//! nothing but a Rust toolchain.
//!
//! - `cargo xtask serve [ARGS]`: builds the bundled plugins, installs them into
//!   the plugins directory, builds the gateway (release) and runs
//!   `gateway serve ARGS`.
//! - `cargo xtask test [ARGS]`: builds the plugins and the Python environment of
//!   the official-SDK tests (`target/clients-venv`), then runs the whole test
//!   suite (`cargo test --release --workspace`, the benchmark harness's smoke run among it),
//!   then the gateway's integration tests again on PostgreSQL (`GATEWAY_TEST_POSTGRES`,
//!   default the local server).
//! - `cargo xtask plugins`: only builds the plugins.
//! - `cargo xtask plugin python DIR [--out FILE]`: builds the Python plugin in `DIR` with
//!   componentize-py (see `python.rs`).
//! - `cargo xtask plugin js DIR [--out FILE]`: builds the JavaScript plugin in `DIR` with
//!   componentize-js (see `js.rs`).
//! - `cargo xtask image [--profile P] [--engine podman|docker] [--tag NAME] [--context-only]`:
//!   the container image of `deploy/container/Containerfile` (see `image.rs`); `--for-tests`:
//!   the tests' image alone, as `test` builds it.
//! - `cargo xtask cycles [--print]`: checks that no two modules of `host/src` depend on each
//!   other (see `cycles.rs`); `--print` lists which modules use which.
//! - `cargo xtask links`: checks that every relative link and `#anchor` of the documentation
//!   resolves (see `links.rs`).
//! - `cargo xtask outside [rust|python|js]`: the SDKs packed and installed as outside authors
//!   get them, their examples and the projects of `gateway plugin new` built and tested away
//!   from the repository (the first step of `test`).
//! - `cargo xtask bench [ARGS]`: builds the plugins, the gateway (the `production` profile, as
//!   deployed) and the benchmark harness (release), then runs `bench ARGS` (default: `all`; see
//!   BENCHMARKS.md);
//!   with `--smoke`, on the test suite's build (see `smoke_build`).

mod cycles;
mod image;
mod js;
mod links;
mod python;
mod rust_sdk;
mod scaffold;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const WASM_TARGET: &str = "wasm32-wasip2";

/// A cargo package built to a plugin.
struct Plugin {
    package: &'static str,
    /// The `.wasm` file it produces, without the extension.
    file: &'static str,
    /// Installed by `serve`; the others exist for the tests.
    bundled: bool,
}

const PLUGINS: &[Plugin] = &[
    Plugin::bundled("echo-provider", "echo"),
    Plugin::bundled("openai", "openai"),
    Plugin::bundled("anthropic", "anthropic"),
    Plugin::bundled("gemini", "gemini"),
    Plugin::bundled("vertex", "vertex"),
    Plugin::bundled("bedrock", "bedrock"),
    Plugin::bundled("pii-guard", "pii-guard"),
    Plugin::test_only("minimal-provider", "minimal"),
    Plugin::test_only("rust-tool", "rust-tool"),
    Plugin::test_only("faulty-plugin", "faulty"),
    Plugin::test_only("hostile-plugin", "hostile"),
    Plugin::test_only("legacy-plugin", "legacy"),
    Plugin::test_only("legacy012-plugin", "legacy012"),
    Plugin::test_only("stateful-plugin", "stateful"),
    Plugin::test_only("test-guard-plugin", "test-guard"),
    Plugin::test_only("test-tool-plugin", "test-tool"),
];

impl Plugin {
    const fn bundled(package: &'static str, file: &'static str) -> Plugin {
        Plugin {
            package,
            file,
            bundled: true,
        }
    }

    const fn test_only(package: &'static str, file: &'static str) -> Plugin {
        Plugin {
            package,
            file,
            bundled: false,
        }
    }
}

/// Plugins that link other plugins' crates as libraries without their `component` feature (their
/// exports: vertex links gemini and anthropic). Cargo unifies a crate's features over one build,
/// so built together with those other plugins they would link the exports too (two components'
/// exports in one: a link error); each is built by a cargo run of its own.
const BUILT_APART: &[&str] = &["vertex"];

/// Plugins whose crate is also a library (`crate-type = ["cdylib", "rlib"]`: vertex links
/// them). Cargo skips link-time optimisation for a crate with an rlib output, which made their
/// components 25% larger (anthropic.wasm 543 KB against 464 KB); each is built with
/// `cargo rustc --crate-type cdylib`, which makes the component alone, whole-program optimised.
const LIBRARIES_TOO: &[&str] = &["anthropic", "gemini"];

/// The gateway's default `plugins_dir`, relative to its working directory.
const DEFAULT_PLUGINS_DIR: &str = "data/plugins";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("test") => test(&args[1..]),
        Some("plugins") => build_plugins(PLUGINS.iter()).map(|_| ()),
        Some("plugin") => match args.get(1).map(String::as_str) {
            Some("python") => python::command(&args[2..]),
            Some("js") => js::command(&args[2..]),
            _ => Err("usage: cargo xtask plugin python|js DIR [--out FILE]".into()),
        },
        Some("outside") => outside(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("image") => image::command(&args[1..]),
        Some("cycles") => check_cycles(args.get(1).is_some_and(|a| a == "--print")),
        Some("links") => links::command(&workspace_root()),
        _ => {
            Err("usage: cargo xtask serve [gateway args] | test [cargo test args] | plugins | plugin python|js DIR [--out FILE] | outside [rust|python|js] | bench [bench args] | image [--profile P] [--engine E] [--tag T] [--context-only] | image --for-tests | cycles [--print] | links".into())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask cycles [--print]`: fails on a module cycle; `--print` also lists which
/// modules use which, level by level.
fn check_cycles(print: bool) -> Result<(), String> {
    let src = workspace_root().join("host").join("src");
    let dependencies = cycles::check(&src)?;
    if print {
        for line in dependencies.lines() {
            println!("{line}");
        }
    }
    eprintln!(
        "xtask: no module cycle in {} ({} uses between modules)",
        src.display(),
        dependencies.count
    );
    Ok(())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Where cargo puts what it builds. A relative `CARGO_TARGET_DIR` is relative
/// to the working directory, which the inner cargo shares with xtask.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// `cargo SUBCOMMAND --manifest-path <workspace>`, run from the caller's
/// directory so relative paths (config, data) mean what the caller meant.
/// The alias's `--quiet` only quiets the outer cargo: these builds show their
/// progress unless given `--quiet` themselves.
fn cargo(subcommand: &str) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .arg(subcommand)
        .arg("--manifest-path")
        .arg(workspace_root().join("Cargo.toml"));
    command
}

fn run(mut command: Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({status})"))
    }
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// Copies the file or directory `from` to `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    if from.is_file() {
        return copy(from, to);
    }
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for entry in
        std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?
    {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

/// `python -m pip install`'s arguments before what it installs, for every venv xtask fills.
const PIP_INSTALL: [&str; 5] = [
    "-m",
    "pip",
    "install",
    "--quiet",
    "--disable-pip-version-check",
];

fn ensure_wasm_target() -> Result<(), String> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == WASM_TARGET)
        })
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    eprintln!("xtask: installing the {WASM_TARGET} target (once)");
    let mut command = Command::new("rustup");
    command.args(["target", "add", WASM_TARGET]);
    run(command)
}

/// Builds `plugins`; returns the directory holding the `.wasm` files.
fn build_plugins<'a>(plugins: impl Iterator<Item = &'a Plugin> + Clone) -> Result<PathBuf, String> {
    ensure_wasm_target()?;
    let (mut apart, together): (Vec<&Plugin>, Vec<&Plugin>) = plugins.clone().partition(|plugin| {
        BUILT_APART.contains(&plugin.package) || LIBRARIES_TOO.contains(&plugin.package)
    });
    // Those that link libraries first: their build also writes the libraries' `.wasm` (without
    // exports), which the libraries' own builds then replace. The others last, so that what
    // their build writes is what stays in the output directory.
    apart.sort_by_key(|plugin| !BUILT_APART.contains(&plugin.package));
    let builds = apart
        .into_iter()
        .map(|plugin| vec![plugin])
        .chain([together]);
    for build in builds.filter(|build| !build.is_empty()) {
        let mut command = match build.as_slice() {
            [plugin] if LIBRARIES_TOO.contains(&plugin.package) => {
                let mut command = cargo("rustc");
                command.args(["--lib", "--crate-type", "cdylib"]);
                command
            }
            _ => cargo("build"),
        };
        command.args(["--profile", "plugin", "--target", WASM_TARGET]);
        for plugin in build {
            command.args(["-p", plugin.package]);
        }
        run(command)?;
    }
    let dir = target_dir().join(WASM_TARGET).join("plugin");
    for plugin in plugins {
        let path = dir.join(format!("{}.wasm", plugin.file));
        // Cargo names a library's file after its crate, whose name cannot hold a hyphen: a
        // plugin named with one (`pii-guard`) is the build's `pii_guard.wasm`, renamed (in
        // one step: a gateway watching the directory never sees half a file) so that the
        // directory holds it once. Cargo puts the file back on its next build, as a hard link
        // to the same file when nothing changed: then the rename does nothing (POSIX) and the
        // second name is removed.
        let built = dir.join(format!("{}.wasm", plugin.file.replace('-', "_")));
        if plugin.file.contains('-') && built.exists() {
            std::fs::rename(&built, &path)
                .and_then(|()| {
                    if built.exists() {
                        std::fs::remove_file(&built)
                    } else {
                        Ok(())
                    }
                })
                .map_err(|e| {
                    format!(
                        "cannot rename {} to {}: {e}",
                        built.display(),
                        path.display()
                    )
                })?;
        }
        if !path.exists() {
            return Err(format!("the build did not produce {}", path.display()));
        }
    }
    Ok(dir)
}

/// Copies a plugin into place the safe way: write a temporary name, then rename,
/// so a gateway watching the directory never sees a half-written file.
fn install(from: &Path, dir: &Path, name: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let temporary = dir.join(format!(".{name}.wasm.tmp"));
    let target = dir.join(format!("{name}.wasm"));
    std::fs::copy(from, &temporary)
        .and_then(|_| std::fs::rename(&temporary, &target))
        .map_err(|e| format!("cannot install {}: {e}", target.display()))
}

fn serve(args: &[String]) -> Result<(), String> {
    // `cargo xtask serve -- ARGS` hands xtask the `--` too; after `serve` it
    // would make the gateway take every option for a stray argument.
    let args = match args.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => args,
    };
    let bundled = || PLUGINS.iter().filter(|plugin| plugin.bundled);
    let built = build_plugins(bundled())?;
    // The plugins go where the gateway will look: the config's plugins_dir
    // when it is given and sets one, else the default. Relative paths stay
    // relative: the gateway runs in this same working directory.
    let config = config_file(args, std::env::var_os("GATEWAY_CONFIG").map(PathBuf::from));
    let plugins_dir = match config {
        Some(file) => configured_plugins_dir(&file).map_err(|e| e.to_string())?,
        None => None,
    }
    .unwrap_or_else(|| PathBuf::from(DEFAULT_PLUGINS_DIR));
    for plugin in bundled() {
        install(
            &built.join(format!("{}.wasm", plugin.file)),
            &plugins_dir,
            plugin.file,
        )?;
    }
    // Built apart from running, with its progress shown: the first release
    // build takes minutes.
    let mut command = cargo("build");
    command.args(["--release", "-p", "gateway"]);
    run(command)?;
    let mut command = Command::new(built_binary("release", "gateway"));
    command.arg("serve").args(args);
    exec(command)
}

/// Runs `command` in place of xtask where the platform allows it, so that a
/// signal for `cargo xtask serve` (Ctrl-C, a service manager's SIGTERM)
/// reaches the gateway itself and its graceful shutdown.
#[cfg(unix)]
fn exec(mut command: Command) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let error = command.exec();
    Err(format!("cannot run {command:?}: {error}"))
}

#[cfg(not(unix))]
fn exec(command: Command) -> Result<(), String> {
    run(command)
}

/// The config file the gateway will read: `--config FILE` / `--config=FILE`
/// among `args`, else `GATEWAY_CONFIG` (`env`), as the gateway's CLI decides.
fn config_file(args: &[String], env: Option<PathBuf>) -> Option<PathBuf> {
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--config" {
            return rest.next().map(PathBuf::from);
        }
        if let Some(file) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(file));
        }
    }
    env
}

/// Why `plugins_dir` could not be taken from the config file.
#[derive(Debug)]
enum ConfigError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    Invalid {
        path: PathBuf,
        source: toml::de::Error,
    },
    NotAString {
        path: PathBuf,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Read { path, source } => {
                write!(f, "cannot read config file {}: {source}", path.display())
            }
            ConfigError::Invalid { path, source } => {
                write!(f, "invalid config {}: {source}", path.display())
            }
            ConfigError::NotAString { path } => {
                write!(
                    f,
                    "invalid config {}: plugins_dir is not a string",
                    path.display()
                )
            }
        }
    }
}

/// The top-level `plugins_dir` of the config file at `path`, if it sets one.
/// A relative path is kept as written: the gateway resolves it against its
/// working directory, not the config file's.
fn configured_plugins_dir(path: &Path) -> Result<Option<PathBuf>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    let table: toml::Table = text.parse().map_err(|source| ConfigError::Invalid {
        path: path.to_owned(),
        source,
    })?;
    match table.get("plugins_dir") {
        None => Ok(None),
        Some(toml::Value::String(dir)) => Ok(Some(PathBuf::from(dir))),
        Some(_) => Err(ConfigError::NotAString {
            path: path.to_owned(),
        }),
    }
}

/// The SDKs as outside authors get them (what `test` checks first): each packed and installed
/// away from the repository, its example and the projects of `gateway plugin new` built and
/// tested there, the components written among the test plugins. `LANG`s: only those.
fn outside(langs: &[String]) -> Result<(), String> {
    let plugins = target_dir().join(WASM_TARGET).join("plugin");
    std::fs::create_dir_all(&plugins)
        .map_err(|e| format!("cannot create {}: {e}", plugins.display()))?;
    let chosen = |lang: &str| langs.is_empty() || langs.iter().any(|l| l == lang);
    if let Some(other) = langs
        .iter()
        .find(|l| !["rust", "python", "js"].contains(&l.as_str()))
    {
        return Err(format!(
            "no language {other}: usage: cargo xtask outside [rust|python|js]..."
        ));
    }
    if chosen("rust") {
        rust_sdk::build_outside(&plugins)?;
    }
    if chosen("python") {
        python::test_installed(&plugins)?;
    }
    if chosen("js") {
        js::check_outside(&plugins)?;
    }
    Ok(())
}

fn test(args: &[String]) -> Result<(), String> {
    let built = build_plugins(PLUGINS.iter())?;
    // The Rust SDK packed and an example built against it outside the repository, as an
    // author would; the e2e tests serve it.
    rust_sdk::build_outside(&built)?;
    // The Python plugins the e2e tests load, beside the others; the Python SDK's own tests and
    // type check; and the SDK installed from its wheel, away from the repository.
    python::build_for_tests(&built)?;
    python::test_sdk()?;
    python::test_installed(&built)?;
    // The JavaScript plugins the e2e tests load, beside the others; and the JavaScript SDK's tests.
    js::build_test_plugins(&built)?;
    let python = clients_venv()?;
    let deploy_python = deploy_venv()?;
    let mcp_node = js::mcp_node()?;
    let oidc_node = js::oidc_node()?;
    let browser = browser();
    // The image's test skips without it (and fails under CI, where .ci/run installs podman and
    // musl-tools), saying why.
    let image = image::build_for_tests(&built).map_err(|why| {
        eprintln!("xtask: the container image was not built: {why}");
        why
    });
    let mut command = cargo("test");
    command
        // Every failure at once, not just the first test binary's.
        .args(["--release", "--workspace", "--no-fail-fast"])
        .args(args)
        .env("GATEWAY_TEST_PLUGINS_DIR", &built)
        .env("GATEWAY_CLIENTS_PYTHON", &python)
        .env("GATEWAY_DEPLOY_PYTHON", &deploy_python)
        .env(MCP_NODE_DIR, &mcp_node)
        .env(OIDC_NODE_DIR, &oidc_node)
        .envs(browser.iter().map(|why| (NO_BROWSER, why)))
        .envs(image.iter().map(|dir| (IMAGE_DIR, dir.as_os_str())))
        .envs(image.as_ref().err().map(|why| (NO_IMAGE, why.as_str())))
        // The first pass is the SQLite one; the PostgreSQL-only tests find the server here.
        .env_remove("GATEWAY_TEST_POSTGRES")
        .env("GATEWAY_TEST_POSTGRES_SERVER", postgres_url());
    let sqlite = run(command);
    // Both passes run whatever the first one found: every failure at once.
    let postgres = test_on_postgres(args, &built, &python, &oidc_node, browser.as_deref());
    match (sqlite, postgres) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(sqlite), Err(postgres)) => Err(format!("{sqlite}\nxtask: {postgres}")),
    }
}

/// The PostgreSQL server of the suite's second pass, unless `GATEWAY_TEST_POSTGRES` names one.
const TEST_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// The gateway's one integration-test binary (`tests/e2e/main.rs`, a module per area).
const E2E: &str = "e2e";
/// Areas (module paths in [`E2E`]) the PostgreSQL pass leaves out: `surfaces::clients` checks
/// the Python SDKs against the wire format, `surfaces::mcp` the MCP SDKs against `/mcp` (the
/// keys' tool scopes it reads are the store's tests' on both), `plugins::python` and `plugins::js` plugins built
/// from other languages, `plugins::scaffold` the projects of `gateway plugin new` and
/// `operations::kubernetes` the Kubernetes manifests (nothing of the store in any of them);
/// `operations::replicas` and `flow::limits` run on PostgreSQL in the first pass (they manage
/// their own databases); `operations::deploy` checks what ships (the systemd unit, the image
/// with its own SQLite config).
const NOT_ON_POSTGRES: [&str; 9] = [
    "surfaces::clients",
    "surfaces::mcp",
    "plugins::python",
    "plugins::js",
    "plugins::scaffold",
    "operations::kubernetes",
    "operations::replicas",
    "flow::limits",
    "operations::deploy",
];

/// The gateway's integration tests again, every gateway on a PostgreSQL database of its own
/// (`GATEWAY_TEST_POSTGRES`): the same tests hold on both stores. What follows `--` in the
/// first pass (filters such as `flow::routing::`, `--nocapture`) carries over; a first pass of
/// other packages or test targets only has no PostgreSQL pass.
fn test_on_postgres(
    args: &[String],
    plugins: &Path,
    python: &Path,
    oidc_node: &Path,
    no_browser: Option<&str>,
) -> Result<(), String> {
    let (cargo_args, test_args) = match args.iter().position(|a| a == "--") {
        Some(at) => args.split_at(at),
        None => (args, &[][..]),
    };
    let packages = option_values(cargo_args, "-p", "--package");
    if !packages.is_empty() && !packages.iter().any(|p| p == "gateway") {
        return Ok(());
    }
    let chosen = option_values(cargo_args, "--test", "--test");
    if !chosen.is_empty() && !chosen.iter().any(|name| name == E2E) {
        return Ok(());
    }
    let url = postgres_url();
    if let Err(why) = reachable(&url) {
        // CI has PostgreSQL: there its absence is a failure. Elsewhere (a laptop without one)
        // the SQLite pass stands, and the skip is said loudly.
        if std::env::var_os("CI").is_some() {
            return Err(format!("no PostgreSQL at {url} (CI requires it): {why}"));
        }
        eprintln!(
            "\nxtask: *** SKIPPED the PostgreSQL pass: no PostgreSQL at {url} ({why}); \
             set GATEWAY_TEST_POSTGRES to an admin URL to run it ***\n"
        );
        return Ok(());
    }
    let mut command = cargo("test");
    // `--workspace`, as in the first pass: the same features unified over the same packages,
    // so the first pass's test binary is reused rather than the gateway built again.
    command
        .args(["--release", "--workspace", "--no-fail-fast", "--test", E2E])
        .args(test_args);
    if test_args.is_empty() {
        command.arg("--");
    }
    for area in NOT_ON_POSTGRES {
        // A test's name begins with its area's module path: `flow::limits::` names that area
        // only.
        command.args(["--skip".to_owned(), format!("{area}::")]);
    }
    command
        .env("GATEWAY_TEST_PLUGINS_DIR", plugins)
        // The admin console's browser test (`console`) runs its Python on both stores.
        .env("GATEWAY_CLIENTS_PYTHON", python)
        .env(OIDC_NODE_DIR, oidc_node)
        .envs(no_browser.map(|why| (NO_BROWSER, why)))
        .env("GATEWAY_TEST_POSTGRES", &url);
    eprintln!(
        "xtask: the integration tests again on PostgreSQL ({url}), all areas but {}",
        NOT_ON_POSTGRES.join(", ")
    );
    let started = std::time::Instant::now();
    let result = run(command).map_err(|e| format!("on PostgreSQL: {e}"));
    eprintln!(
        "xtask: the PostgreSQL pass took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    result
}

/// Whether something listens at the host and port of a `postgres://` URL (the first host;
/// 127.0.0.1:5432 when it names none).
fn reachable(url: &str) -> Result<(), String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let host_port = host_port.split(',').next().unwrap_or("");
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) => (host, port.parse::<u16>().map_err(|e| e.to_string())?),
        None => (host_port, 5432),
    };
    let host = if host.is_empty() { "127.0.0.1" } else { host };
    let addresses = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("{host}:{port}: {e}"))?;
    let mut last = format!("{host}:{port}: no address");
    for address in addresses {
        match std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(3)) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("{address}: {e}"),
        }
    }
    Err(last)
}

/// `GATEWAY_TEST_POSTGRES` when set, else [`TEST_POSTGRES_URL`].
fn postgres_url() -> String {
    std::env::var("GATEWAY_TEST_POSTGRES")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| TEST_POSTGRES_URL.to_owned())
}

/// The values of an option given as `SHORT VALUE`, `LONG VALUE` or `LONG=VALUE`.
fn option_values(args: &[String], short: &str, long: &str) -> Vec<String> {
    let mut values = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == short || arg == long {
            values.extend(args.next().cloned());
        } else if let Some(value) = arg.strip_prefix(&format!("{long}=")) {
            values.push(value.to_owned());
        }
    }
    values
}

/// The browser the admin console's test drives (`tests/e2e/operations/console.rs`): Debian's
/// chromium.
const CHROMIUM: &str = "/usr/bin/chromium";
/// Set for the tests when there is no browser and none could be installed: why. The console's
/// browser test then skips, saying so (under `CI` it fails instead).
const NO_BROWSER: &str = "GATEWAY_TEST_NO_BROWSER";
/// Where `image::build_for_tests` left the test image's `inspect.json` and `rootfs.tar`.
const IMAGE_DIR: &str = "GATEWAY_TEST_IMAGE";
/// Why there is no test image (its test skips, or fails under CI).
const NO_IMAGE: &str = "GATEWAY_TEST_NO_IMAGE";
/// Where the e2e tests find the MCP test server of the handshake era ([`js::mcp_node`]).
const MCP_NODE_DIR: &str = "GATEWAY_TEST_MCP_NODE_DIR";
/// Where the e2e tests find the OpenID provider the console signs in through
/// ([`js::oidc_node`]).
const OIDC_NODE_DIR: &str = "GATEWAY_TEST_OIDC_NODE_DIR";

/// Makes sure the console's browser test has a browser: `GATEWAY_TEST_CHROMIUM`, else Debian's
/// `chromium`, installed with apt-get when it is missing and this user may (root, or sudo
/// without a password), as `.ci/run` does. `None` when there is one; else why there is none.
fn browser() -> Option<String> {
    if std::env::var_os("GATEWAY_TEST_CHROMIUM").is_some() || Path::new(CHROMIUM).exists() {
        return None;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0");
    let sudo = !root
        && Command::new("sudo")
            .args(["-n", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !(root || sudo) || !Path::new("/usr/bin/apt-get").exists() {
        return Some(format!(
            "no browser at {CHROMIUM}, and this user cannot install Debian's chromium package \
             (apt-get as root or with sudo): install it, or set GATEWAY_TEST_CHROMIUM"
        ));
    }
    eprintln!("xtask: installing Debian's chromium for the admin console's browser test (once)");
    let apt = |args: &[&str]| {
        let mut command = Command::new(if sudo { "sudo" } else { "apt-get" });
        if sudo {
            command.args(["-n", "apt-get"]);
        }
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        run(command)
    };
    match apt(&["update", "-q"]).and_then(|()| apt(&["install", "-y", "-q", "chromium"])) {
        Ok(()) if Path::new(CHROMIUM).exists() => None,
        Ok(()) => Some(format!("apt-get installed chromium, but not at {CHROMIUM}")),
        Err(e) => Some(format!("installing Debian's chromium failed: {e}")),
    }
}

/// The Python environment of the official-SDK suite (`tests/clients`): `target/clients-venv`.
/// Returns its interpreter.
fn clients_venv() -> Result<PathBuf, String> {
    venv(
        "clients-venv",
        "tests/clients/requirements.txt",
        "the SDK tests",
    )
}

/// The Kubernetes manifests' tools (`tests/e2e/operations/kubernetes.rs`): kubectl and
/// kubernetes-validate in `target/deploy-venv`. Returns its interpreter, beside which they are.
fn deploy_venv() -> Result<PathBuf, String> {
    venv(
        "deploy-venv",
        "tests/deploy/requirements.txt",
        "the Kubernetes manifests' test",
    )
}

/// `target/NAME`, a venv created when missing and reinstalled from `requirements` (a path in
/// the repository) when that file is newer than its last install. Returns its interpreter.
fn venv(name: &str, requirements: &str, needed_by: &str) -> Result<PathBuf, String> {
    let venv = target_dir().join(name);
    let python = venv.join("bin").join("python");
    let requirements = workspace_root().join(requirements);
    let stamp = venv.join("installed.stamp");
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let requirements_time =
        modified(&requirements).ok_or_else(|| format!("cannot read {}", requirements.display()))?;
    if !python.exists() {
        eprintln!("xtask: creating {} (once)", venv.display());
        let mut command = Command::new("python3");
        command.args(["-m", "venv"]).arg(&venv);
        run(command).map_err(|e| {
            format!("{e}\nfor {needed_by}: Python 3 with its venv module (`python3 -m venv`)")
        })?;
    }
    if modified(&stamp).is_none_or(|installed| installed < requirements_time) {
        let mut command = Command::new(&python);
        command.args(PIP_INSTALL).arg("-r").arg(&requirements);
        run(command)?;
        std::fs::write(&stamp, "").map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    }
    Ok(python)
}

/// The plugins the benchmark loads (`bench --provider`), the guard its `--guard` is
/// documented with (`target/wasm32-wasip2/plugin/pii-guard.wasm`), and the tool plugin of its
/// `mcp` scenario (`[mcp_servers.weather]`).
const BENCHED: [&str; 4] = ["openai", "bedrock", "pii-guard", "rust-tool"];

fn bench(args: &[String]) -> Result<(), String> {
    // Only what it loads: building every plugin would build vertex, anthropic and gemini
    // again (their separate builds invalidate each other's fingerprints), ~40 s for nothing.
    let built = build_plugins(
        PLUGINS
            .iter()
            .filter(|plugin| BENCHED.contains(&plugin.file)),
    )?;
    let smoke = args.iter().any(|a| a == "--smoke");
    if smoke {
        smoke_build()?;
    } else {
        // The gateway as it is deployed (the `production` profile: whole-program
        // optimisation); the harness needs no more than `release`.
        let mut build = cargo("build");
        build.args(["--profile", "production", "--quiet", "-p", "gateway"]);
        run(build)?;
        let mut build = cargo("build");
        build.args(["--release", "--quiet", "-p", "bench"]);
        run(build)?;
    }
    let mut command = Command::new(built_binary("release", "bench"));
    // Options alone (`--smoke`) mean the whole benchmark.
    if args.first().is_none_or(|a| a.starts_with('-')) {
        command.arg("all");
    }
    command.args(args).arg("--plugins-dir").arg(built);
    if !smoke && !args.iter().any(|a| a == "--gateway") {
        command
            .arg("--gateway")
            .arg(built_binary("production", "gateway"));
    }
    run(command)
}

/// The build `cargo xtask bench --smoke` runs on, which times nothing: the test suite's own
/// (`cargo test --release --workspace`, which puts `gateway` and `bench` in `target/release`
/// for their integration tests: `e2e`, `bench/tests/smoke.rs`), there already after
/// `cargo xtask test`. The gateway's feature set without the tests' dev-dependencies would be
/// a second release build of it (~100 s on 2 cores) for figures a smoke run does not read.
fn smoke_build() -> Result<(), String> {
    let mut build = cargo("test");
    build.args(["--release", "--quiet", "--workspace", "--no-run"]);
    run(build)
}

/// The executable `name` as cargo's `profile` puts it in the target directory.
fn built_binary(profile: &str, name: &str) -> PathBuf {
    target_dir()
        .join(profile)
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|&a| a.to_owned()).collect()
    }

    #[test]
    fn the_postgres_pass_reads_the_first_passs_choices() {
        let given = args(&[
            "-p",
            "gateway",
            "--test",
            "api",
            "--test=cost",
            "--",
            "--test",
            "x",
        ]);
        let cut = given.iter().position(|a| a == "--").unwrap_or(given.len());
        assert_eq!(option_values(&given[..cut], "-p", "--package"), ["gateway"]);
        assert_eq!(
            option_values(&given[..cut], "--test", "--test"),
            ["api", "cost"]
        );
    }

    /// The PostgreSQL pass names the one test target and skips areas by their module names:
    /// both must exist, or the pass would run nothing or everything.
    #[test]
    fn the_postgres_pass_names_what_exists() {
        let root = workspace_root();
        let manifest = std::fs::read_to_string(root.join("host/Cargo.toml")).expect("manifest");
        let table: toml::Table = manifest.parse().expect("valid manifest");
        let tests: Vec<&str> = table["test"]
            .as_array()
            .expect("[[test]] targets")
            .iter()
            .filter_map(|test| test.get("name").and_then(toml::Value::as_str))
            .collect();
        assert_eq!(tests, [E2E]);
        let e2e = root.join("tests/e2e");
        for area in NOT_ON_POSTGRES {
            // Each module of the path is declared in its parent: `main.rs`, then `mod.rs` files.
            let (mut parent, mut dir) = (e2e.join("main.rs"), e2e.clone());
            for module in area.split("::") {
                let text = std::fs::read_to_string(&parent).expect("the parent module");
                assert!(
                    text.contains(&format!("\nmod {module};")),
                    "no area {area}: no `mod {module};` in {}",
                    parent.display()
                );
                dir = dir.join(module);
                parent = dir.join("mod.rs");
            }
        }
    }

    fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, text).expect("write the config");
        (dir, path)
    }

    #[test]
    fn plugins_dir_with_a_trailing_comment() {
        let (_dir, path) = config("listen = \"127.0.0.1:9000\"\nplugins_dir = \"x\" # note\n");
        assert_eq!(
            configured_plugins_dir(&path).expect("valid"),
            Some(PathBuf::from("x"))
        );
    }

    #[test]
    fn plugins_dir_in_any_toml_string_form() {
        let (_dir, path) = config("plugins_dir='C:\\plugins\\ #1'\n");
        assert_eq!(
            configured_plugins_dir(&path).expect("valid"),
            Some(PathBuf::from("C:\\plugins\\ #1"))
        );
        let (_dir, path) = config("plugins_dir = \"a\\\"b/\\u00e9\"\n");
        assert_eq!(
            configured_plugins_dir(&path).expect("valid"),
            Some(PathBuf::from("a\"b/é"))
        );
    }

    #[test]
    fn relative_plugins_dir_is_kept_as_written() {
        // The gateway resolves it against its working directory, which is
        // xtask's, not against the config file's directory.
        let (_dir, path) = config("plugins_dir = \"./my/plugins\"\n");
        assert_eq!(
            configured_plugins_dir(&path).expect("valid"),
            Some(PathBuf::from("./my/plugins"))
        );
    }

    #[test]
    fn config_without_plugins_dir() {
        let (_dir, path) = config(
            "# plugins_dir = \"commented out\"\nlisten = \"127.0.0.1:9000\"\n\n\
             [providers.demo]\nplugin = \"echo\"\nplugins_dir = \"not top-level\"\n",
        );
        assert_eq!(configured_plugins_dir(&path).expect("valid"), None);
    }

    #[test]
    fn invalid_config_is_an_error() {
        let (_dir, path) = config("plugins_dir = \"unterminated\n");
        let error = configured_plugins_dir(&path).expect_err("invalid TOML");
        assert!(matches!(error, ConfigError::Invalid { .. }), "{error:?}");
        assert!(error.to_string().contains("gateway.toml"), "{error}");

        let (_dir, path) = config("plugins_dir = 5\n");
        let error = configured_plugins_dir(&path).expect_err("not a string");
        assert!(matches!(error, ConfigError::NotAString { .. }), "{error:?}");
    }

    #[test]
    fn missing_config_is_an_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let error =
            configured_plugins_dir(&dir.path().join("absent.toml")).expect_err("no such file");
        assert!(matches!(error, ConfigError::Read { .. }), "{error:?}");
    }

    #[test]
    fn config_file_from_args_then_environment() {
        let env = || Some(PathBuf::from("env.toml"));
        let file = |list: &[&str], env| config_file(&args(list), env);
        assert_eq!(
            file(&["--config", "a.toml"], env()),
            Some(PathBuf::from("a.toml"))
        );
        assert_eq!(
            file(&["--listen", "x", "--config=b.toml"], env()),
            Some(PathBuf::from("b.toml"))
        );
        assert_eq!(file(&[], env()), Some(PathBuf::from("env.toml")));
        assert_eq!(file(&[], None), None);
        // The gateway refuses a `--config` without its value; nothing to install by.
        assert_eq!(file(&["--config"], env()), None);
    }
}
