//! The reports of the invocation records: `gateway usage` and `gateway invocations export`.

use std::process::ExitCode;

use super::CliError;
use super::args::UsageArgs;
use crate::reports::{self, ExportFormat, ReportError};
use crate::store::report::RecordRange;
use crate::store::{Store, StoreError};

pub(super) async fn usage(store: &Store, args: UsageArgs) -> Result<ExitCode, CliError> {
    let range = record_range(store, args.project.clone(), args.since, args.until).await?;
    let groups = args.groups();
    let rows = store.usage(&range, &groups).await?;
    let text = if args.json {
        let document = reports::usage_json(&range, &groups, &rows);
        serde_json::to_string_pretty(&document)? + "\n"
    } else {
        reports::usage_table(&groups, &rows)
    };
    match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(ReportError::Write(e).into()),
        // Written, or the reader went away (`| head`) having what it wanted.
        _ => Ok(ExitCode::SUCCESS),
    }
}

pub(super) async fn export(
    store: &Store,
    project: Option<String>,
    since: i64,
    until: Option<i64>,
    format: ExportFormat,
) -> Result<ExitCode, CliError> {
    let range = record_range(store, project, Some(since), until).await?;
    match reports::export(store, &range, format, std::io::stdout()).await {
        Ok(_) => Ok(ExitCode::SUCCESS),
        // The reader went away (`| head`): it had what it wanted.
        Err(ReportError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e.into()),
    }
}

/// The records a report covers; refused when the bounds leave nothing or the project does
/// not exist (a mistyped id would otherwise read as a project without usage).
async fn record_range(
    store: &Store,
    project_id: Option<String>,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
) -> Result<RecordRange, CliError> {
    if let (Some(since), Some(until)) = (since_ms, until_ms)
        && until <= since
    {
        return Err(CliError::EmptyRange);
    }
    if let Some(project_id) = &project_id
        && store.project(project_id).await?.is_none()
    {
        return Err(StoreError::UnknownProject(project_id.clone()).into());
    }
    Ok(RecordRange {
        project_id,
        since_ms,
        until_ms,
        ..RecordRange::default()
    })
}
