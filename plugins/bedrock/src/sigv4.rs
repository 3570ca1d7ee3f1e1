//! AWS Signature Version 4 (header signing), as every Bedrock Runtime request carries it.
//!
//! The steps, each a function so that AWS's published test vectors can check them one by one
//! (`tests/sigv4`): the canonical request ([`canonical_request`]), the string to sign
//! ([`string_to_sign`]), the signing key derived from the secret for the day, region and
//! service ([`signing_key`]), and the signature ([`signature`]). [`sign`] applies them to an
//! outgoing request. The hash and the MAC are `sha2`'s and `hmac`'s; only the texts they are
//! computed over are written here.
//!
//! Bedrock is not S3: the canonical path is the path as sent, URI-encoded once more (a model id
//! `anthropic.claude-3-5-sonnet-20240620-v1:0` travels as `...v1%3A0` and is canonicalized as
//! `...v1%253A0`), with `.`/`..` segments and empty segments removed first.

use std::time::{SystemTime, UNIX_EPOCH};

use gateway_plugin_sdk::ProviderError;
use gateway_plugin_sdk::http::Request;
use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha2::{Digest, Sha256};

/// The algorithm's name, in the string to sign and the `Authorization` header.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Everything but SigV4's unreserved characters (`A-Z a-z 0-9 - _ . ~`) is encoded.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The keys that sign: an access key id, its secret, and a session token for temporary
/// credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    pub session_token: Option<&'a str>,
}

impl std::fmt::Debug for Credentials<'_> {
    /// The access key id only: the secret and the token never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Where a signature is valid: the region and the service (`bedrock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    pub region: &'a str,
    pub service: &'a str,
}

/// A moment as SigV4 writes it: `x-amz-date` (`20150830T123600Z`) and its day (`20150830`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmzDate(String);

impl AmzDate {
    /// The UTC time `unix_seconds` after the epoch.
    pub fn from_unix(unix_seconds: u64) -> AmzDate {
        let days = unix_seconds / 86_400;
        let seconds = unix_seconds % 86_400;
        let (year, month, day) = civil_from_days(days);
        AmzDate(format!(
            "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        ))
    }

    /// The current time of the host's wall clock (WASI's in the component).
    pub fn now() -> AmzDate {
        // A clock before 1970 is a broken host; the signature then fails at AWS, saying so.
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        AmzDate::from_unix(seconds)
    }

    /// `20150830T123600Z`, or `None` for any other text.
    #[cfg(test)]
    pub fn parse(text: &str) -> Option<AmzDate> {
        let bytes = text.as_bytes();
        let digits = |range: std::ops::Range<usize>| bytes[range].iter().all(u8::is_ascii_digit);
        let valid = bytes.len() == 16
            && digits(0..8)
            && bytes[8] == b'T'
            && digits(9..15)
            && bytes[15] == b'Z';
        valid.then(|| AmzDate(text.to_owned()))
    }

    /// The `x-amz-date` value.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The day, `YYYYMMDD`, of the credential scope.
    pub fn day(&self) -> &str {
        &self.0[..8]
    }
}

/// `(year, month, day)` of the `days`-th day after 1970-01-01 in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// The lowercase hex SHA-256 of `bytes` (the payload hash, the canonical request's hash).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn hmac(key: &[u8], data: &[u8]) -> Result<[u8; 32], ProviderError> {
    // HMAC takes keys of any length: the error is the trait's, never this MAC's.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .map_err(|e| ProviderError::Failed(format!("cannot sign the request: {e}")))?;
    mac.update(data);
    Ok(mac.finalize().into_bytes().into())
}

/// A canonical request and the header names it signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    /// The text whose hash the string to sign holds.
    pub request: String,
    /// `host;x-amz-date;...`: the `SignedHeaders` of the `Authorization` header.
    pub signed_headers: String,
}

/// The canonical request of a request to `path` (as sent, already percent-encoded where it
/// needs to be) with `query` (without `?`), signing `headers` (all of them: pass only the ones
/// to sign), whose payload hashes to `payload_hash`. With `normalize`, `.`/`..` and empty path
/// segments are removed first (every service but S3).
///
/// Header names are lowercased and sorted; a name given several times has its values joined
/// with `,` in the order given; values lose surrounding whitespace and runs of spaces become one.
pub fn canonical_request(
    method: &str,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
    payload_hash: &str,
    normalize: bool,
) -> Canonical {
    let path = if normalize {
        normalize_path(path)
    } else {
        path.to_owned()
    };
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        path
    };
    let mut encoded_path = String::with_capacity(path.len() + 16);
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            encoded_path.push('/');
        }
        encoded_path.extend(utf8_percent_encode(segment, UNRESERVED));
    }

    let mut names: Vec<(String, String)> = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let name = name.trim().to_ascii_lowercase();
        let value = collapse_spaces(value);
        match names.iter_mut().find(|(seen, _)| *seen == name) {
            Some((_, values)) => {
                values.push(',');
                values.push_str(&value);
            }
            None => names.push((name, value)),
        }
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let signed_headers = names
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(";");

    let mut request = String::with_capacity(256);
    request.push_str(method);
    request.push('\n');
    request.push_str(&encoded_path);
    request.push('\n');
    request.push_str(&canonical_query(query));
    request.push('\n');
    for (name, value) in &names {
        request.push_str(name);
        request.push(':');
        request.push_str(value);
        request.push('\n');
    }
    request.push('\n');
    request.push_str(&signed_headers);
    request.push('\n');
    request.push_str(payload_hash);
    Canonical {
        request,
        signed_headers,
    }
}

/// The path without `.` and `..` segments and without empty segments (`//`), keeping a
/// trailing slash (RFC 3986's dot-segment removal, as AWS's signers normalize).
fn normalize_path(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            segment => segments.push(segment),
        }
    }
    let trailing = (path.ends_with('/') || path.ends_with("/.") || path.ends_with("/.."))
        && !segments.is_empty();
    let mut normalized = String::with_capacity(path.len());
    for segment in &segments {
        normalized.push('/');
        normalized.push_str(segment);
    }
    if trailing || normalized.is_empty() {
        normalized.push('/');
    }
    normalized
}

/// The query's parameters, each name and value URI-encoded (after decoding what the query
/// already encoded), sorted by name and then value, joined with `&`.
fn canonical_query(query: &str) -> String {
    let encode = |text: &str| {
        let decoded = percent_decode_str(text).decode_utf8_lossy();
        utf8_percent_encode(&decoded, UNRESERVED).to_string()
    };
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (encode(name), encode(value))
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The value without surrounding whitespace, its runs of spaces (and folded lines) as one space.
fn collapse_spaces(value: &str) -> String {
    let mut collapsed = String::with_capacity(value.len());
    for word in value.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    collapsed
}

/// `DAY/REGION/SERVICE/aws4_request`.
pub fn credential_scope(date: &AmzDate, scope: Scope<'_>) -> String {
    format!(
        "{}/{}/{}/aws4_request",
        date.day(),
        scope.region,
        scope.service
    )
}

/// The string to sign: the algorithm, the time, the credential scope and the canonical
/// request's hash, one per line.
pub fn string_to_sign(date: &AmzDate, scope: Scope<'_>, canonical_request: &str) -> String {
    format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        date.as_str(),
        credential_scope(date, scope),
        sha256_hex(canonical_request.as_bytes())
    )
}

/// The key of the day, region and service, derived from the secret access key.
pub fn signing_key(
    secret_access_key: &str,
    date: &AmzDate,
    scope: Scope<'_>,
) -> Result<[u8; 32], ProviderError> {
    let key = hmac(
        format!("AWS4{secret_access_key}").as_bytes(),
        date.day().as_bytes(),
    )?;
    let key = hmac(&key, scope.region.as_bytes())?;
    let key = hmac(&key, scope.service.as_bytes())?;
    hmac(&key, b"aws4_request")
}

/// The signature: the lowercase hex HMAC of the string to sign under the signing key.
pub fn signature(signing_key: &[u8; 32], string_to_sign: &str) -> Result<String, ProviderError> {
    Ok(hex::encode(hmac(signing_key, string_to_sign.as_bytes())?))
}

/// The `Authorization` header's value.
pub fn authorization(
    access_key_id: &str,
    date: &AmzDate,
    scope: Scope<'_>,
    signed_headers: &str,
    signature: &str,
) -> String {
    format!(
        "{ALGORITHM} Credential={access_key_id}/{}, SignedHeaders={signed_headers}, Signature={signature}",
        credential_scope(date, scope)
    )
}

/// The parts of an absolute URL the signature covers: the authority as the `Host` header
/// carries it (lowercase, without a default port), the path (`/` when empty) and the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts<'a> {
    pub host: String,
    pub path: &'a str,
    pub query: &'a str,
}

/// Splits `url` (`http` or `https`, no user info) into the parts the signature covers.
pub fn url_parts(url: &str) -> Result<UrlParts<'_>, ProviderError> {
    let invalid = |why: &str| ProviderError::Failed(format!("cannot sign the URL {url}: {why}"));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| invalid("it has no scheme"))?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => "443",
        "http" => "80",
        _ => return Err(invalid("it is not http or https")),
    };
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(end);
    if authority.is_empty() || authority.contains('@') {
        return Err(invalid("it has no host, or has user info"));
    }
    // As the client writes `Host`: lowercase, without the scheme's default port (or an empty
    // one). An IPv6 literal ends with `]`, so its colons are never taken for a port's.
    let mut host = authority.to_ascii_lowercase();
    for port in [format!(":{default_port}"), ":".to_owned()] {
        if let Some(stripped) = host.strip_suffix(port.as_str()) {
            host = stripped.to_owned();
        }
    }
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    Ok(UrlParts {
        host,
        path: if path.is_empty() { "/" } else { path },
        query,
    })
}

/// Signs `request` for `scope` at `date`: adds `x-amz-date` (and `x-amz-security-token` with
/// temporary credentials) and the `Authorization` header, signing `host` (as the URL gives it),
/// `content-type` when set, and those two. Other headers stay unsigned, so that headers the
/// gateway adds on the way (a trace context) cannot break the signature.
pub fn sign(
    request: Request,
    credentials: &Credentials<'_>,
    scope: Scope<'_>,
    date: &AmzDate,
) -> Result<Request, ProviderError> {
    let url = request.url().to_owned();
    let parts = url_parts(&url)?;
    let mut request = request.header("x-amz-date", date.as_str());
    if let Some(token) = credentials.session_token {
        request = request.header("x-amz-security-token", token);
    }
    let mut signed: Vec<(&str, &str)> = vec![("host", parts.host.as_str())];
    for name in ["content-type", "x-amz-date", "x-amz-security-token"] {
        if let Some(value) = request.header_value(name) {
            signed.push((name, value));
        }
    }
    let canonical = canonical_request(
        request.method(),
        parts.path,
        parts.query,
        &signed,
        &sha256_hex(request.body_bytes()),
        true,
    );
    let key = signing_key(credentials.secret_access_key, date, scope)?;
    let signature = signature(&key, &string_to_sign(date, scope, &canonical.request))?;
    let value = authorization(
        credentials.access_key_id,
        date,
        scope,
        &canonical.signed_headers,
        &signature,
    );
    Ok(request.header("authorization", &value))
}
