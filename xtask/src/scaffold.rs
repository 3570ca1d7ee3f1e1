//! The projects `gateway plugin new` writes, checked as an author uses them: every language and
//! kind rendered by the same `gateway-scaffold` the command uses, against the SDK packed as an
//! outside author gets it (by [`crate::rust_sdk`], [`crate::python`] and [`crate::js`], each
//! in its outside-the-repository check), its own tests run, built, and the component written
//! among the test plugins as `scaffold-LANG-KIND.wasm`, which the e2e tests serve
//! (`plugins::scaffold`).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

pub use gateway_scaffold::{Kind, Lang, Sdk};
use gateway_scaffold::{Name, render, write};

/// The plugin's name, and its component's file stem among the test plugins.
pub fn name(lang: Lang, kind: Kind) -> Name {
    let name = format!("scaffold-{}-{}", lang.as_str(), kind.as_str());
    Name::parse(&name).expect("lowercase words joined by `-`")
}

/// The file `lang`'s `kind` project is built into among the test plugins: `NAME.wasm`.
pub fn component(lang: Lang, kind: Kind) -> String {
    format!("{}.wasm", name(lang, kind).as_str())
}

/// Writes `lang`'s `kind` project into `parent/NAME` (replacing what was there), its SDK
/// `sdk`; returns the project's folder.
pub fn project(parent: &Path, lang: Lang, kind: Kind, sdk: &Sdk) -> Result<PathBuf, String> {
    let name = name(lang, kind);
    let dir = parent.join(name.as_str());
    let _ = std::fs::remove_dir_all(&dir);
    write(&dir, &render(lang, kind, &name, sdk)).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// What `lang`'s projects are, for the checks' stamps: a change to any file one of them gets
/// (dotfiles included, which the stamps of source trees skip) checks the language again.
pub fn fingerprint(lang: Lang) -> String {
    let mut hasher = DefaultHasher::new();
    let name = Name::parse("fingerprint").expect("a valid name");
    for kind in Kind::ALL {
        for file in render(lang, kind, &name, &Sdk::Published) {
            file.path.hash(&mut hasher);
            file.text.hash(&mut hasher);
        }
    }
    format!("{:016x}", hasher.finish())
}
