//! `gateway plugin new`: a plugin project written from the templates of `gateway-scaffold`,
//! which CI builds and tests in every language and kind.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use gateway_scaffold::{Kind, Lang, Name, Sdk, WriteError, next_steps, render, write};

use super::CliError;
use super::args::PluginCommand;

/// Why no project was written.
#[derive(Debug, thiserror::Error)]
pub(super) enum ScaffoldError {
    #[error("--sdk {}: {source}", path.display())]
    SdkPath {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] WriteError),
}

pub(super) fn run(command: PluginCommand) -> Result<ExitCode, CliError> {
    match command {
        PluginCommand::New {
            name,
            lang,
            kind,
            dir,
            sdk,
        } => new(&name, lang.lang(), kind.kind(), dir, sdk.as_deref()),
    }
}

fn new(
    name: &Name,
    lang: Lang,
    kind: Kind,
    dir: Option<PathBuf>,
    sdk: Option<&Path>,
) -> Result<ExitCode, CliError> {
    let sdk = match sdk {
        // Absolute: the project is elsewhere than the folder this ran in.
        Some(path) => {
            Sdk::Path(
                std::fs::canonicalize(path).map_err(|source| ScaffoldError::SdkPath {
                    path: path.to_owned(),
                    source,
                })?,
            )
        }
        None => checkout_sdk(lang).map_or(Sdk::Published, Sdk::Path),
    };
    let dir = dir.unwrap_or_else(|| PathBuf::from(name.as_str()));
    let files = render(lang, kind, name, &sdk);
    write(&dir, &files).map_err(ScaffoldError::from)?;
    println!(
        "wrote a {} {} plugin into {}:",
        lang.as_str(),
        kind.as_str(),
        dir.display()
    );
    for file in &files {
        println!("  {}", file.path);
    }
    match &sdk {
        Sdk::Path(path) => println!("its SDK: {}", path.display()),
        Sdk::Published => println!(
            "its SDK: the registry's release (not published yet: until it is, give --sdk the \
             SDK's folder of a checkout of the gateway's repository)"
        ),
    }
    println!("next, in {} (README.md says more):", dir.display());
    for step in next_steps(lang, name, &sdk) {
        println!("  {step}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The SDK of `lang` in the repository this gateway was built from, when it is still there: a
/// gateway built from a checkout scaffolds against that checkout's SDK.
fn checkout_sdk(lang: Lang) -> Option<PathBuf> {
    let folder = match lang {
        Lang::Rust => "plugin-sdk",
        Lang::Python => "plugin-sdk-python",
        Lang::Js => "plugin-sdk-js",
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(folder);
    std::fs::canonicalize(path).ok().filter(|p| p.is_dir())
}
