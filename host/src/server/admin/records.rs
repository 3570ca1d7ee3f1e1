//! The invocation records for the admin console: a filtered list a page at a time (newest
//! first), one record, their usage over time and grouped, and a CSV export of a filtered range
//! streamed a page at a time.

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{CONTENT_DISPOSITION, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::Answer;
use crate::access::Visible;
use crate::clock::{format_time_ms, parse_time};
use crate::error::ApiError;
use crate::http::{Body, channel_response, error_response};
use crate::reports::{ExportFormat, export_pages};
use crate::state::AppState;
use crate::store::report::{Cursor, GroupBy, RecordRange, UsageRow};
use crate::store::{Invocation, InvocationStatus};

/// Records of a list page when the request does not say.
const DEFAULT_PAGE: u32 = 50;
/// The most records of a list page.
const MAX_PAGE: u32 = 200;
/// Of a record's request and response, what one record's page shows: the rest is cut.
const MAX_BODY_CHARS: usize = 64 * 1024;
/// The filters every records endpoint takes.
const FILTERS: [&str; 7] = [
    "projectId",
    "userId",
    "route",
    "model",
    "status",
    "since",
    "until",
];

/// The request's query parameters, percent-decoded; one not in `known` (or [`FILTERS`]) is
/// refused, naming those that are.
fn parameters(
    request: &Request<Incoming>,
    known: &[&str],
) -> Result<Vec<(String, String)>, ApiError> {
    let query = request.uri().query().unwrap_or_default();
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    for (name, _) in &pairs {
        if !FILTERS.contains(&name.as_str()) && !known.contains(&name.as_str()) {
            let all: Vec<&str> = FILTERS.iter().chain(known).copied().collect();
            return Err(ApiError::BadRequest(format!(
                "unknown query parameter {name:?}: use {}",
                all.join(", ")
            )));
        }
    }
    Ok(pairs)
}

/// The value of `name`, when given and not empty.
fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(n, v)| n == name && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

/// The records the filters select, of the projects the caller sees.
fn range_of(pairs: &[(String, String)], visible: &Visible) -> Result<RecordRange, ApiError> {
    let text = |name: &str| value(pairs, name).map(str::to_owned);
    let time = |name: &str| {
        value(pairs, name)
            .map(parse_time)
            .transpose()
            .map_err(|message| ApiError::InvalidParam {
                param: name.to_owned(),
                message: format!("{name}: {message}"),
            })
    };
    let status = value(pairs, "status")
        .map(|text| {
            InvocationStatus::ALL
                .into_iter()
                .find(|status| status.as_str() == text)
                .ok_or_else(|| ApiError::InvalidParam {
                    param: "status".into(),
                    message: format!(
                        "status {text:?}: use one of {}",
                        InvocationStatus::ALL
                            .map(InvocationStatus::as_str)
                            .join(", ")
                    ),
                })
        })
        .transpose()?;
    Ok(RecordRange {
        project_id: text("projectId"),
        projects: match visible {
            Visible::All => None,
            Visible::Only(projects) => Some(projects.clone()),
        },
        since_ms: time("since")?,
        until_ms: time("until")?,
        user_id: text("userId"),
        route: text("route"),
        model: text("model"),
        status,
    })
}

/// A record as the list and its own page show it.
fn record_json(record: &Invocation) -> serde_json::Value {
    let mut json = record.to_json();
    json["keyPrefix"] = json!(record.key_prefix);
    json
}

/// `GET /admin/invocations`: the filtered records, newest first, `limit` at a time; `next` is
/// the `cursor` of the page after (older), `null` after the last.
pub(super) async fn list(
    state: &AppState,
    request: &Request<Incoming>,
    visible: &Visible,
) -> Answer {
    let pairs = parameters(request, &["cursor", "limit"])?;
    let range = range_of(&pairs, visible)?;
    let before = value(&pairs, "cursor")
        .map(|token| {
            Cursor::parse(token).ok_or_else(|| ApiError::InvalidParam {
                param: "cursor".into(),
                message: "cursor: pass back a page's next as it came".into(),
            })
        })
        .transpose()?;
    let limit = match value(&pairs, "limit") {
        None => DEFAULT_PAGE,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| ApiError::InvalidParam {
                param: "limit".into(),
                message: format!("limit: a number from 1 to {MAX_PAGE}"),
            })?,
    };
    // Records are written in batches: the ones this process answered count too.
    state.log.flush().await;
    let page = state
        .store
        .recent_invocations(&range, before.as_ref(), limit)
        .await?;
    let records: Vec<_> = page.records.iter().map(record_json).collect();
    Ok((
        StatusCode::OK,
        json!({
            "invocations": records,
            "next": page.next.as_ref().map(Cursor::token),
        }),
    ))
}

/// `GET /admin/invocations/{id}`: one record, its request and response cut to
/// [`MAX_BODY_CHARS`] characters each (`bodiesTruncated` says when one was).
pub(super) async fn show(state: &AppState, invocation: &str, visible: &Visible) -> Answer {
    let not_found = || ApiError::NotFound(format!("no invocation {invocation:?}"));
    let id = Uuid::parse_str(invocation).map_err(|_| not_found())?;
    state.log.flush().await;
    let mut record = state
        .store
        .invocation(&id)
        .await?
        // Another project's record is not there, for a project role.
        .filter(|record| match &record.project_id {
            Some(project) => visible.contains(project),
            None => *visible == Visible::All,
        })
        .ok_or_else(not_found)?;
    let mut truncated = false;
    for body in [&mut record.request, &mut record.response] {
        if let Some(text) = body
            && let Some((cut, _)) = text.char_indices().nth(MAX_BODY_CHARS)
        {
            text.truncate(cut);
            truncated = true;
        }
    }
    let mut json = record_json(&record);
    json["bodiesTruncated"] = json!(truncated);
    Ok((StatusCode::OK, json))
}

/// How usage rows are split in time.
fn bucket_of(pairs: &[(String, String)]) -> Result<Option<GroupBy>, ApiError> {
    match value(pairs, "bucket") {
        None => Ok(None),
        Some("hour") => Ok(Some(GroupBy::Hour)),
        Some("day") => Ok(Some(GroupBy::Day)),
        Some(other) => Err(ApiError::InvalidParam {
            param: "bucket".into(),
            message: format!("bucket {other:?}: use hour or day"),
        }),
    }
}

/// What usage rows are grouped by, besides time.
fn group_of(pairs: &[(String, String)]) -> Result<Option<GroupBy>, ApiError> {
    let group = match value(pairs, "by") {
        None => return Ok(None),
        Some("model") => GroupBy::Model,
        Some("route") => GroupBy::Route,
        Some("project") => GroupBy::Project,
        Some("user") => GroupBy::User,
        Some("key") => GroupBy::Key,
        Some(other) => {
            return Err(ApiError::InvalidParam {
                param: "by".into(),
                message: format!("by {other:?}: use model, route, project, user or key"),
            });
        }
    };
    Ok(Some(group))
}

/// A bucket's start as RFC 3339, whichever bucket it is (a day is named by its date).
fn bucket_start(name: &str) -> String {
    if name.len() == "YYYY-MM-DD".len() {
        format!("{name}T00:00:00.000Z")
    } else {
        name.to_owned()
    }
}

fn usage_row(row: &UsageRow, bucket: bool, group: bool) -> serde_json::Value {
    let mut values = row.group.iter();
    let mut json = json!({
        "requests": row.requests,
        "errors": row.errors,
        "promptTokens": row.prompt_tokens,
        "completionTokens": row.completion_tokens,
        "totalTokens": row.total_tokens,
        "costUsd": row.cost_usd,
        "p50DurationMs": row.p50_duration_ms,
        "p95DurationMs": row.p95_duration_ms,
    });
    if bucket {
        json["bucket"] = json!(
            values
                .next()
                .cloned()
                .flatten()
                .as_deref()
                .map(bucket_start)
        );
    }
    if group {
        json["group"] = json!(values.next().cloned().flatten());
    }
    json
}

/// `GET /admin/usage`: what the filtered records add up to, by hour or day (`bucket`) and by
/// model, route, project, user or key (`by`), each optional.
pub(super) async fn usage(
    state: &AppState,
    request: &Request<Incoming>,
    visible: &Visible,
) -> Answer {
    let pairs = parameters(request, &["bucket", "by"])?;
    let range = range_of(&pairs, visible)?;
    let (bucket, group) = (bucket_of(&pairs)?, group_of(&pairs)?);
    let by: Vec<GroupBy> = bucket.into_iter().chain(group).collect();
    state.log.flush().await;
    let rows = state.store.usage(&range, &by).await?;
    let rows: Vec<_> = rows
        .iter()
        .map(|row| usage_row(row, bucket.is_some(), group.is_some()))
        .collect();
    Ok((
        StatusCode::OK,
        json!({
            "since": range.since_ms.map(format_time_ms),
            "until": range.until_ms.map(format_time_ms),
            "bucket": bucket.map(GroupBy::field),
            "by": group.map(GroupBy::field),
            "rows": rows,
        }),
    ))
}

/// `GET /admin/invocations.csv`: the filtered records as `invocations export --format csv`
/// writes them, oldest first, sent a page at a time as they are read.
pub(super) async fn export(
    state: Arc<AppState>,
    request: &Request<Incoming>,
    id: &Uuid,
    visible: &Visible,
) -> Response<Body> {
    let range = match parameters(request, &[]).and_then(|pairs| range_of(&pairs, visible)) {
        Ok(range) => range,
        Err(error) => return error_response(&error, id),
    };
    state.log.flush().await;
    // Two pages in flight at most: a slow reader holds back the reading, not the memory.
    let (pages, body) = mpsc::channel::<Bytes>(2);
    let invocation = *id;
    tokio::spawn(async move {
        let sent = export_pages(&state.store, &range, ExportFormat::Csv, |chunk| {
            let pages = pages.clone();
            async move {
                pages
                    .send(Bytes::from(chunk))
                    .await
                    .map_err(|_| std::io::Error::other("the caller went away"))
            }
        })
        .await;
        if let Err(error) = sent {
            // The status went out with the first page: the body just ends short.
            tracing::warn!(invocation_id = %invocation, "admin API: the CSV export stopped: {error}");
        }
    });
    let mut response = channel_response(body, "text/csv; charset=utf-8", id);
    response.headers_mut().insert(
        CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"invocations.csv\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_named_by_their_start() {
        assert_eq!(bucket_start("2026-11-27"), "2026-11-27T00:00:00.000Z");
        assert_eq!(
            bucket_start("2026-11-27T13:00:00.000Z"),
            "2026-11-27T13:00:00.000Z"
        );
    }

    #[test]
    fn a_usage_row_names_its_bucket_and_group() {
        let row = UsageRow {
            group: vec![Some("2026-11-27".into()), None],
            requests: 3,
            errors: 1,
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 12,
            cached_prompt_tokens: 0,
            cache_creation_tokens: 0,
            reasoning_tokens: 0,
            cost_usd: 0.5,
            p50_duration_ms: Some(4),
            p95_duration_ms: Some(9),
        };
        let json = usage_row(&row, true, true);
        assert_eq!(json["bucket"], "2026-11-27T00:00:00.000Z");
        assert_eq!(json["group"], serde_json::Value::Null);
        assert_eq!(json["totalTokens"], 12);
        let plain = usage_row(&row, false, false);
        assert!(plain.get("bucket").is_none() && plain.get("group").is_none());
    }
}
