//! The projects `gateway plugin new` writes, checked as an author uses them: every language and
//! kind rendered by the same `gateway-scaffold` the command uses, against the SDK packed as an
//! outside author gets it (by [`crate::rust_sdk`], [`crate::python`] and [`crate::js`], each
//! in its outside-the-repository check), its own tests run, built, and the component written
//! among the test plugins as `scaffold-LANG-KIND.wasm`, which the e2e tests serve
//! (`plugins::scaffold`).

use std::path::{Path, PathBuf};

pub use gateway_scaffold::{Kind, Lang, Sdk};
use gateway_scaffold::{Name, render, write};

use crate::workspace_root;

/// The plugin's name, and its component's file stem among the test plugins.
pub fn name(lang: Lang, kind: Kind) -> String {
    format!("scaffold-{}-{}", lang.as_str(), kind.as_str())
}

/// Writes `lang`'s `kind` project into `parent/NAME` (replacing what was there), its SDK
/// `sdk`; returns the project's folder.
pub fn project(parent: &Path, lang: Lang, kind: Kind, sdk: &Sdk) -> Result<PathBuf, String> {
    let name = name(lang, kind);
    let parsed = Name::parse(&name).map_err(|e| e.to_string())?;
    let dir = parent.join(&name);
    let _ = std::fs::remove_dir_all(&dir);
    write(&dir, &render(lang, kind, &parsed, sdk)).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// The templates, for the checks' fingerprints: a change to one checks its language again.
pub fn templates() -> PathBuf {
    workspace_root().join("scaffold").join("templates")
}
