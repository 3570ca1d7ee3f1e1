//! Reading a request body as every surface does: one JSON object and nothing
//! after it, the offending field named in the error; and a token count's answer, marked as
//! an estimate the same way in every shape.

use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};

use crate::error::ApiError;

/// A token count's `answer` in its surface's shape, with `"estimated": true` when the count is
/// an estimate (an exact one has no such field: the answer is the provider's own shape).
pub fn count_answer(
    mut answer: serde_json::Value,
    count: crate::plugins::types::TokenCount,
) -> String {
    if count.estimated {
        answer["estimated"] = true.into();
    }
    answer.to_string()
}

/// Parses `bytes` as one JSON object into `T`. A field of the wrong type is
/// [`ApiError::InvalidParam`] naming its path (`messages[2].role`); anything
/// that is not one JSON object (an array, trailing bytes, bad syntax) is a
/// plain bad request.
pub fn parse_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // serde would also accept a struct as an array of its fields; callers must send an object.
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        None => return Err(ApiError::BadRequest("the request body is empty".into())),
        Some(_) if serde_json::from_slice::<IgnoredAny>(bytes).is_ok() => {
            return Err(ApiError::BadRequest(
                "the request body must be a JSON object".into(),
            ));
        }
        Some(_) => {}
    }
    // Tracking the path costs an allocation per key: it is done only to
    // describe a body that failed (parsing is deterministic, so it fails again).
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = match T::deserialize(&mut de) {
        Ok(parsed) => parsed,
        Err(_) => {
            de = serde_json::Deserializer::from_slice(bytes);
            parse_tracking_path(&mut de)?
        }
    };
    // One JSON value and nothing after it: bytes a parser would ignore are a
    // request another reader could understand differently.
    de.end().map_err(|inner| {
        ApiError::BadRequest(format!("the request body is not valid JSON: {inner}"))
    })?;
    Ok(parsed)
}

/// Parses with the path of every field tracked, so that an error names the offending one.
fn parse_tracking_path<'de, T: Deserialize<'de>>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::BadRequest(format!("the request body is not valid JSON: {inner}"))
        } else if path == "." {
            // A problem of the top-level object itself (e.g. a field given twice).
            ApiError::BadRequest(format!("invalid request body: {inner}"))
        } else {
            ApiError::InvalidParam {
                message: format!("invalid field {path}: {inner}"),
                param: path,
            }
        }
    })
}
