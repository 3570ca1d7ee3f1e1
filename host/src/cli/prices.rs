//! `gateway prices import`: the prices file from the community price list.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::Config;
use crate::pricing::PriceTable;
use crate::pricing::litellm::{self, ImportError, Skip};

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
pub(super) enum PricesError {
    #[error(
        "the config{} has no prices_file: give --out PATH, and set prices_file = PATH in the \
         config for the gateway to load it",
        .0.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default()
    )]
    NoDestination(Option<PathBuf>),
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}; the prices file is unchanged", .path.display())]
    Import { path: PathBuf, source: ImportError },
    #[error("cannot write {}: {source}; the prices file is unchanged", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Most changed, added or removed models named one by one; past it, only counted.
const NAMED: usize = 20;

/// Reads `file` and replaces the prices file (`out`, else the config's `prices_file`).
pub(super) fn import(
    config: &Config,
    config_path: Option<&Path>,
    file: &Path,
    out: Option<&Path>,
) -> Result<ExitCode, super::CliError> {
    let out = match (out, &config.prices_file) {
        (Some(out), _) => out.to_owned(),
        (None, Some(configured)) => configured.clone(),
        (None, None) => {
            return Err(PricesError::NoDestination(config_path.map(Path::to_owned)).into());
        }
    };
    let text = std::fs::read_to_string(file).map_err(|source| PricesError::Read {
        path: file.to_owned(),
        source,
    })?;
    let mut imported = litellm::import(&text).map_err(|source| PricesError::Import {
        path: file.to_owned(),
        source,
    })?;
    let today = crate::clock::format_time_ms(crate::clock::now_ms());
    imported.table.as_of = today.get(..10).unwrap_or(&today).to_owned();
    let old = match std::fs::read_to_string(&out) {
        Ok(text) => match PriceTable::parse(&text) {
            Ok(table) => table,
            Err(error) => {
                println!(
                    "(the current {} does not parse, so every model counts as added: {})",
                    out.display(),
                    error
                );
                PriceTable::default()
            }
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => PriceTable::default(),
        Err(source) => return Err(PricesError::Read { path: out, source }.into()),
    };
    let changes = litellm::changes(&old, &imported.table);
    let header = format!(
        "Written by `gateway prices import` on {date} from {source}\n\
         (LiteLLM's model_prices_and_context_window.json format; that list is MIT-licensed,\n\
         BerriAI). US dollars per million tokens, per plugin (a route's `plugin`) and model, in\n\
         the format of the gateway's host/prices.toml. Loaded as the config's `prices_file`\n\
         (after the routes' `pricing` tables, before the shipped prices) and reloaded when it\n\
         changes. The next import replaces this file whole: keep lasting overrides in a route's\n\
         `pricing` table.",
        source = file.display(),
        date = imported.table.as_of,
    );
    write_atomically(&out, imported.table.to_toml(&header).as_bytes()).map_err(|source| {
        PricesError::Write {
            path: out.clone(),
            source,
        }
    })?;

    let per_plugin: Vec<String> = imported
        .table
        .plugins
        .iter()
        .map(|(plugin, models)| format!("{plugin} {}", models.len()))
        .collect();
    println!(
        "wrote {}: {} models ({})",
        out.display(),
        imported.table.len(),
        per_plugin.join(", ")
    );
    let named = |label: &str, names: &[String]| {
        println!("{label}: {}", names.len());
        for name in names.iter().take(NAMED) {
            println!("  {name}");
        }
        if names.len() > NAMED {
            println!("  ... and {} more", names.len() - NAMED);
        }
    };
    named("added", &changes.added);
    named("changed", &changes.changed);
    println!("unchanged: {}", changes.unchanged);
    named("removed", &changes.removed);
    println!("skipped: {}", imported.skipped.len());
    for (reason, detail) in skip_reasons(&imported.skipped) {
        println!("  {reason}{detail}");
    }
    if config.prices_file.as_deref() != Some(out.as_path()) {
        println!(
            "(set prices_file = {:?} in the config for the gateway to load it)",
            out.display().to_string()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Each reason with its count and, for providers and modes, the largest few of them.
fn skip_reasons(skipped: &[(String, Skip)]) -> Vec<(String, String)> {
    let mut reasons: BTreeMap<String, (usize, BTreeMap<String, usize>)> = BTreeMap::new();
    for (_, skip) in skipped {
        let (count, kinds) = reasons.entry(skip.to_string()).or_default();
        *count += 1;
        match skip {
            Skip::Provider(provider) if !provider.is_empty() => {
                *kinds.entry(provider.clone()).or_default() += 1;
            }
            Skip::Mode(mode) => *kinds.entry(mode.clone()).or_default() += 1,
            _ => {}
        }
    }
    reasons
        .into_iter()
        .map(|(reason, (count, kinds))| {
            let mut kinds: Vec<(String, usize)> = kinds.into_iter().collect();
            kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let mut detail = kinds
                .iter()
                .take(6)
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            if kinds.len() > 6 {
                detail.push_str(", ...");
            }
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(" ({detail})")
            };
            (format!("{reason}: {count}"), detail)
        })
        .collect()
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new one, never part of
/// one: to a new file beside it, flushed to disk, then renamed over it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = dir.join(temp_name);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        // The rename itself is durable once the directory is.
        std::fs::File::open(&dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}
