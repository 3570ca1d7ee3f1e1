//! Not an area: what the areas that run Python against the gateway share (`surfaces::clients`,
//! the official SDKs; `operations::console`, the browser test): the interpreter of
//! `target/clients-venv` (`tests/clients/requirements.txt`) and a command for it that nothing of
//! this machine's environment steers.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `cargo xtask test` names the venv's interpreter.
const PYTHON_VAR: &str = "GATEWAY_CLIENTS_PYTHON";

/// Variables the SDKs would read when the code does not say (the tests always say), and
/// proxies that must not take requests to 127.0.0.1.
const CLEARED: [&str; 13] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
];

/// The venv's interpreter; a missing one fails the test: a suite that silently skips would
/// rot.
pub fn python() -> PathBuf {
    match std::env::var_os(PYTHON_VAR) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "{PYTHON_VAR} is not set: run `cargo xtask test`, which creates the virtual \
             environment target/clients-venv from tests/clients/requirements.txt and sets it \
             (or set it to a Python with those packages installed)"
        ),
    }
}

/// `python` run from the workspace's root, writing no `__pycache__` into the source tree,
/// with [`CLEARED`] unset and no proxy.
pub fn command(python: &Path) -> Command {
    let mut command = Command::new(python);
    command
        .current_dir(workspace_root())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "*");
    for var in CLEARED {
        command.env_remove(var);
    }
    command
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .expect("the host crate lives in the workspace")
}
