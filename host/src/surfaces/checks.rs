//! Checks of request values that more than one surface makes, each refused as a 400 naming
//! the caller's parameter: the end user's id (kept in every record) and the ranges of numeric
//! parameters (`max_tokens`, `n`, `temperature`); and a model name in a path, decoded.

use std::fmt::Display;
use std::ops::RangeInclusive;

use crate::error::ApiError;

/// The longest end-user id a request may carry (`userId`, `user`, `metadata.user_id`), in
/// bytes: it is kept in every record, listed and grouped by; an id, not a document.
pub const MAX_USER_ID_BYTES: usize = 256;

/// `user` if it is at most [`MAX_USER_ID_BYTES`] long.
pub fn user_id<'a>(param: &str, user: Option<&'a str>) -> Result<Option<&'a str>, ApiError> {
    match user {
        Some(user) if user.len() > MAX_USER_ID_BYTES => Err(ApiError::InvalidParam {
            param: param.to_owned(),
            message: format!(
                "{param} is {} bytes long: at most {MAX_USER_ID_BYTES} are allowed",
                user.len()
            ),
        }),
        user => Ok(user),
    }
}

/// `n` if it is within `range`, else a 400 naming `param` and the bound it is beyond.
pub fn in_range<T: PartialOrd + Display>(
    param: &str,
    n: T,
    range: RangeInclusive<T>,
) -> Result<T, ApiError> {
    if range.contains(&n) {
        return Ok(n);
    }
    let message = if n < *range.start() {
        format!("{param} must be at least {}, got {n}", range.start())
    } else {
        format!("{param} must be at most {}, got {n}", range.end())
    };
    Err(ApiError::InvalidParam {
        param: param.to_owned(),
        message,
    })
}

/// A path segment with its `%XX` sequences decoded (a model's name: OpenAI's SDKs encode the `/`
/// of `ROUTE/MODEL`); `None` when they do not make UTF-8 text.
pub fn percent_decoded(text: &str) -> Option<String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(|text| text.into_owned())
}

/// A listing's `limit`: a whole number from 1 to `most`.
pub fn page_limit(text: &str, most: u32) -> Option<u32> {
    text.parse().ok().filter(|limit| (1..=most).contains(limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(error: ApiError) -> (String, String) {
        match error {
            ApiError::InvalidParam { param, message } => (param, message),
            other => panic!("not an InvalidParam: {other:?}"),
        }
    }

    #[test]
    fn user_ids_up_to_256_bytes() {
        let longest = "é".repeat(128);
        assert_eq!(user_id("user", Some(&longest)).unwrap(), Some(&*longest));
        assert_eq!(user_id("user", None).unwrap(), None);
        let (param, text) = message(user_id("userId", Some(&"u".repeat(257))).unwrap_err());
        assert_eq!(param, "userId");
        assert_eq!(text, "userId is 257 bytes long: at most 256 are allowed");
    }

    #[test]
    fn ranges_name_the_bound() {
        assert_eq!(in_range("n", 128, 1..=128).unwrap(), 128);
        let (param, text) = message(in_range("n", 1_000_000, 1..=128).unwrap_err());
        assert_eq!(
            (param.as_str(), text.as_str()),
            ("n", "n must be at most 128, got 1000000")
        );
        let (_, text) = message(in_range("max_tokens", 0u64, 1..=u64::MAX).unwrap_err());
        assert_eq!(text, "max_tokens must be at least 1, got 0");
        let (_, text) = message(in_range("top_p", 1.5, 0.0..=1.0).unwrap_err());
        assert_eq!(text, "top_p must be at most 1, got 1.5");
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decoded("r%2Fm").as_deref(), Some("r/m"));
        assert_eq!(percent_decoded("r/m").as_deref(), Some("r/m"));
        // Not an escape: left as it is (and then names no model).
        assert_eq!(percent_decoded("a%2").as_deref(), Some("a%2"));
        assert_eq!(percent_decoded("%FF"), None);
        assert_eq!(percent_decoded("%C3%A9").as_deref(), Some("é"));
    }
}
