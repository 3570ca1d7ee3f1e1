//! The plugin projects `gateway plugin new` writes: for each language (Rust, Python,
//! JavaScript) and kind (provider, guard, tool), the smallest plugin of that kind, a test of it
//! with the SDK's harness, the manifest that builds it and a README with the lines that build
//! and install it.
//!
//! The templates are files under `templates/`, embedded at build time: `LANG/` holds what the
//! three kinds of a language share (README, manifest), `LANG/KIND/` what is a kind's own, and
//! `config/KIND.toml` the gateway config that serves a kind, shown in the README. They are
//! filled by plain substitution of `{{name}}`, `{{module}}`, `{{kind}}`, `{{sdk}}`,
//! `{{sdk_note}}` and `{{config}}`. xtask builds and tests every language and kind from
//! [`render`] in CI, so what the command writes is what was checked.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The language of a plugin project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// The kind of plugin: the WIT world it implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Provider,
    Guard,
    Tool,
}

impl Lang {
    pub const ALL: [Lang; 3] = [Lang::Rust, Lang::Python, Lang::Js];

    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Provider, Kind::Guard, Kind::Tool];

    /// Also the WIT world's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Provider => "provider",
            Kind::Guard => "guard",
            Kind::Tool => "tool",
        }
    }
}

/// A plugin's name: the `.wasm` file's stem the gateway loads it by, and the name of its
/// package in every language, so lowercase ASCII words joined by `-` (`acme-chat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name(String);

/// Why a name cannot be a plugin's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadName(String);

impl fmt::Display for BadName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadName {}

/// The longest name: a file stem and a package name everywhere.
const MAX_NAME: usize = 64;

/// Names a Rust package or library cannot take (cargo's reserved names and Rust's keywords
/// that are a whole name once `-` became `_`).
const RESERVED: &[&str] = &[
    "test",
    "std",
    "core",
    "alloc",
    "proc-macro",
    "self",
    "super",
    "crate",
    "fn",
    "mod",
    "struct",
    "enum",
    "type",
    "impl",
    "trait",
    "use",
    "pub",
    "let",
    "match",
    "loop",
    "while",
    "for",
    "if",
    "else",
    "return",
    "async",
    "await",
    "dyn",
    "move",
    "static",
    "const",
    "unsafe",
    "where",
    "extern",
    "ref",
    "mut",
    "true",
    "false",
    "in",
    "as",
    "break",
    "continue",
];

impl Name {
    pub fn parse(name: &str) -> Result<Name, BadName> {
        let words_ok = name.split('-').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
        if name.is_empty()
            || name.len() > MAX_NAME
            || !words_ok
            || !name.starts_with(|c: char| c.is_ascii_lowercase())
        {
            return Err(BadName(format!(
                "`{name}` cannot name a plugin: use 1 to {MAX_NAME} lowercase letters, digits and single `-` between words, starting with a letter (e.g. `acme-chat`)"
            )));
        }
        if RESERVED.contains(&name) {
            return Err(BadName(format!(
                "`{name}` cannot name a plugin: it is reserved in Rust or cargo"
            )));
        }
        Ok(Name(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a Rust library (and its `.wasm` file of a cargo build): `-` becomes `_`.
    pub fn module(&self) -> String {
        self.0.replace('-', "_")
    }
}

/// Where the project gets its SDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdk {
    /// From the language's registry (crates.io, PyPI, npm), at the version of the WIT line.
    Published,
    /// A local copy: the SDK's source folder, or a packed one (a `.whl`, a `.tgz`), as each
    /// language's tools take it.
    Path(PathBuf),
}

/// The SDKs' version line: the WIT package `gateway:provider@0.2.x` they target.
const SDK_LINE: &str = "0.2";

impl Sdk {
    /// How `lang`'s manifest or install command names it.
    fn spec(&self, lang: Lang) -> String {
        match (self, lang) {
            (Sdk::Published, Lang::Rust) => format!("\"{SDK_LINE}\""),
            (Sdk::Published, Lang::Python) => format!("'gateway-plugin-sdk=={SDK_LINE}.*'"),
            (Sdk::Published, Lang::Js) => format!("^{SDK_LINE}.0"),
            (Sdk::Path(path), Lang::Rust) => format!("{{ path = {} }}", toml_string(path)),
            (Sdk::Path(path), Lang::Python) => shell_word(path),
            (Sdk::Path(path), Lang::Js) => {
                // The template quotes it: the literal without its quotes.
                let literal = json_string(&format!("file:{}", path.display()));
                literal[1..literal.len() - 1].to_owned()
            }
        }
    }

    fn note(&self) -> String {
        match self {
            Sdk::Published => format!(
                "The SDK's {SDK_LINE} line targets the gateway's WIT `gateway:provider@{SDK_LINE}`."
            ),
            Sdk::Path(path) => format!(
                "The SDK comes from {}, a local copy (`gateway plugin new --sdk PATH` names another).",
                path.display()
            ),
        }
    }
}

/// A TOML basic string of `path`.
fn toml_string(path: &Path) -> String {
    json_string(&path.display().to_string())
}

/// A JSON (and TOML basic) string literal of `text`.
fn json_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if (c as u32) < 0x20 => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// `path` as one word of a POSIX shell command line.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// One template: the file it becomes, relative to the project's folder, and its text.
struct Template {
    lang: Lang,
    /// `None`: every kind of the language.
    kind: Option<Kind>,
    path: &'static str,
    text: &'static str,
}

macro_rules! templates {
    ($( $lang:ident $kind:tt $path:literal ),* $(,)?) => {
        &[$(Template {
            lang: Lang::$lang,
            kind: templates!(@kind $kind),
            path: $path,
            text: include_str!(concat!("../templates/", templates!(@dir $lang $kind), $path)),
        }),*]
    };
    (@kind all) => { None };
    (@kind $kind:ident) => { Some(Kind::$kind) };
    (@dir $lang:ident all) => { concat!(templates!(@lang $lang), "/") };
    (@dir $lang:ident $kind:ident) => { concat!(templates!(@lang $lang), "/", templates!(@kindname $kind), "/") };
    (@lang Rust) => { "rust" };
    (@lang Python) => { "python" };
    (@lang Js) => { "js" };
    (@kindname Provider) => { "provider" };
    (@kindname Guard) => { "guard" };
    (@kindname Tool) => { "tool" };
}

const TEMPLATES: &[Template] = templates![
    Rust all "README.md",
    Rust all ".gitignore",
    Rust all "Cargo.toml",
    Rust all ".cargo/config.toml",
    Rust Provider "src/lib.rs",
    Rust Provider "src/tests.rs",
    Rust Guard "src/lib.rs",
    Rust Guard "src/tests.rs",
    Rust Tool "src/lib.rs",
    Rust Tool "src/tests.rs",
    Python all "README.md",
    Python all ".gitignore",
    Python all "plugin.toml",
    Python Provider "app.py",
    Python Provider "test_app.py",
    Python Guard "app.py",
    Python Guard "test_app.py",
    Python Tool "app.py",
    Python Tool "test_app.py",
    Js all "README.md",
    Js all ".gitignore",
    Js all ".npmrc",
    Js all "package.json",
    Js Provider "index.js",
    Js Provider "test/plugin.test.js",
    Js Guard "index.js",
    Js Guard "test/plugin.test.js",
    Js Tool "index.js",
    Js Tool "test/plugin.test.js",
];

/// The gateway config that serves each kind, shown in the README.
fn config(kind: Kind) -> &'static str {
    match kind {
        Kind::Provider => include_str!("../templates/config/provider.toml"),
        Kind::Guard => include_str!("../templates/config/guard.toml"),
        Kind::Tool => include_str!("../templates/config/tool.toml"),
    }
}

/// A file of a project: its path relative to the project's folder, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: &'static str,
    pub text: String,
}

/// The files of a `lang` plugin of `kind` named `name`, getting its SDK from `sdk`.
pub fn render(lang: Lang, kind: Kind, name: &Name, sdk: &Sdk) -> Vec<File> {
    let fill = |text: &str| {
        text.replace("{{name}}", name.as_str())
            .replace("{{module}}", &name.module())
            .replace("{{kind}}", kind.as_str())
    };
    let config = fill(config(kind));
    let sdk_spec = sdk.spec(lang);
    let sdk_note = sdk.note();
    TEMPLATES
        .iter()
        .filter(|t| t.lang == lang && t.kind.is_none_or(|k| k == kind))
        .map(|t| File {
            path: t.path,
            // `{{config}}` and `{{sdk}}` last: what they bring in is not a template.
            text: fill(t.text)
                .replace("{{sdk_note}}", &sdk_note)
                .replace("{{sdk}}", &sdk_spec)
                .replace("{{config}}", config.trim_end()),
        })
        .collect()
}

/// The commands that come next, run in the project's folder: test, build, install.
pub fn next_steps(lang: Lang, name: &Name, sdk: &Sdk) -> Vec<String> {
    let install = |built: &str| {
        format!(
            "then copy {built} into the gateway's plugins_dir as {}.wasm",
            name.as_str()
        )
    };
    match lang {
        Lang::Rust => vec![
            "cargo test".into(),
            "cargo build --release --target wasm32-wasip2".into(),
            install(&format!(
                "target/wasm32-wasip2/release/{}.wasm",
                name.module()
            )),
        ],
        Lang::Python => vec![
            "python3 -m venv .venv && . .venv/bin/activate".into(),
            format!("pip install {}", sdk.spec(Lang::Python)),
            "python -m unittest".into(),
            "gateway-plugin build .".into(),
            install(&format!("{}.wasm", name.as_str())),
        ],
        Lang::Js => vec![
            "npm install".into(),
            "npm test".into(),
            "npm run build".into(),
            install(&format!("{}.wasm", name.as_str())),
        ],
    }
}

/// Why a project could not be written.
#[derive(Debug)]
pub enum WriteError {
    /// The folder exists and holds something: nothing was written.
    NotEmpty(PathBuf),
    Io(PathBuf, io::Error),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::NotEmpty(dir) => write!(
                f,
                "{} exists and is not empty: nothing was written (choose another --dir)",
                dir.display()
            ),
            WriteError::Io(path, error) => write!(f, "cannot write {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for WriteError {}

/// Writes `files` into `dir`, which must not exist or be empty, creating it and its
/// subfolders. Each file is created new (never over another).
pub fn write(dir: &Path, files: &[File]) -> Result<(), WriteError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |error| WriteError::Io(path, error)
    };
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(WriteError::NotEmpty(dir.to_owned()));
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(WriteError::Io(dir.to_owned(), error)),
    }
    for file in files {
        let path = dir.join(file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io(&path))?;
        out.write_all(file.text.as_bytes()).map_err(io(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_package_names_everywhere() {
        for good in ["acme", "acme-chat", "a1-b2", "x"] {
            assert!(Name::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Acme",
            "1acme",
            "acme_chat",
            "-acme",
            "acme-",
            "a--b",
            "ac me",
            "test",
            "fn",
        ] {
            assert!(Name::parse(bad).is_err(), "{bad}");
        }
        assert!(Name::parse(&"a".repeat(65)).is_err());
        assert_eq!(Name::parse("acme-chat").unwrap().module(), "acme_chat");
    }

    #[test]
    fn every_template_is_filled_whole() {
        let name = Name::parse("acme-chat").unwrap();
        for sdk in [Sdk::Published, Sdk::Path("/opt/it's sdk".into())] {
            for lang in Lang::ALL {
                for kind in Kind::ALL {
                    let files = render(lang, kind, &name, &sdk);
                    assert!(files.iter().any(|f| f.path == "README.md"));
                    for file in &files {
                        assert!(
                            !file.text.contains("{{"),
                            "{}/{}: {} is left in {}",
                            lang.as_str(),
                            kind.as_str(),
                            file.text
                                .split("{{")
                                .nth(1)
                                .unwrap_or("")
                                .split("}}")
                                .next()
                                .unwrap_or(""),
                            file.path
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn sdk_specs_quote_what_they_must() {
        let path = Sdk::Path(r#"/a "b"\c"#.into());
        assert_eq!(path.spec(Lang::Rust), r#"{ path = "/a \"b\"\\c" }"#);
        assert_eq!(Sdk::Path("/opt/sdk".into()).spec(Lang::Python), "/opt/sdk");
        assert_eq!(
            Sdk::Path("/opt/my sdk".into()).spec(Lang::Python),
            "'/opt/my sdk'"
        );
        assert_eq!(
            Sdk::Path("/opt/sdk.tgz".into()).spec(Lang::Js),
            "file:/opt/sdk.tgz"
        );
        assert_eq!(Sdk::Published.spec(Lang::Rust), "\"0.2\"");
    }

    #[test]
    fn a_project_goes_only_into_an_empty_folder() {
        let dir = std::env::temp_dir().join(format!("scaffold-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let name = Name::parse("acme").unwrap();
        let files = render(Lang::Rust, Kind::Tool, &name, &Sdk::Published);
        write(&dir, &files).unwrap();
        assert!(dir.join("src/lib.rs").is_file());
        assert!(matches!(write(&dir, &files), Err(WriteError::NotEmpty(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
