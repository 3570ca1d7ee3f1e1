//! Config values that check themselves as they are read, so a config that parses is one the
//! gateway can serve with: a zero timeout or cap, a memory limit over what the engine reserves,
//! a `base_url` the sandbox could never reach are refused by serde, and serde_path_to_error
//! puts the key in front of the reason (`providers.x.memory_limit_mb: ... must be positive`).
//!
//! Counts and sizes are std's nonzero integers in a [`Positive`], for the config's own
//! wording; values with more to check are newtypes.

use std::collections::BTreeMap;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use crate::plugins::{AllowedHosts, HostsError, MAX_MEMORY_LIMIT_BYTES};

/// Why a config value was refused (the key is put in front of it by the caller).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("must be positive")]
    NotPositive,
    #[error("must be at most {max}")]
    TooLarge { max: u64 },
    /// A URL or `host:port` the sandbox cannot allow.
    #[error(transparent)]
    Host(#[from] HostsError),
    #[error("{0}")]
    Redis(String),
    #[error("{0}")]
    Traces(String),
}

/// std's nonzero integers, for [`Positive`]: each with the integer it is read as.
pub trait NonZeroInt: Copy {
    type Raw: for<'de> Deserialize<'de>;
    fn new(raw: Self::Raw) -> Option<Self>;
    fn get(self) -> Self::Raw;
}

macro_rules! nonzero_int {
    ($($nonzero:ty => $raw:ty),*) => {$(
        impl NonZeroInt for $nonzero {
            type Raw = $raw;
            fn new(raw: $raw) -> Option<Self> {
                <$nonzero>::new(raw)
            }
            fn get(self) -> $raw {
                <$nonzero>::get(self)
            }
        }
    )*};
}
nonzero_int!(NonZeroU32 => u32, NonZeroU64 => u64, NonZeroUsize => usize);

/// A count, size or time the config requires above zero: std's nonzero integer `N`, read from
/// a plain integer with the config's own wording for a zero, "must be positive" (serde's own
/// message names the Rust type, which an operator editing a TOML file has no use for).
/// Written back as the integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Positive<N>(N);

impl<N: NonZeroInt> Positive<N> {
    pub const fn new(n: N) -> Positive<N> {
        Positive(n)
    }

    pub fn get(self) -> N::Raw {
        self.0.get()
    }

    pub fn nonzero(self) -> N {
        self.0
    }
}

impl<N: NonZeroInt> From<N> for Positive<N> {
    fn from(n: N) -> Positive<N> {
        Positive(n)
    }
}

impl<'de, N: NonZeroInt> Deserialize<'de> for Positive<N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Positive<N>, D::Error> {
        N::new(N::Raw::deserialize(deserializer)?)
            .map(Positive)
            .ok_or_else(|| D::Error::custom(ValueError::NotPositive))
    }
}

/// A plugin instance's memory cap in MiB: at least one, and at most what the engine reserves
/// for each instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct MemoryMb(NonZeroU64);

impl MemoryMb {
    pub const MAX: u64 = (MAX_MEMORY_LIMIT_BYTES / 1024 / 1024) as u64;

    pub fn get(self) -> u64 {
        self.0.get()
    }

    pub fn bytes(self) -> usize {
        // At most MAX_MEMORY_LIMIT_BYTES, a usize: the product fits.
        (self.0.get() * 1024 * 1024) as usize
    }
}

impl TryFrom<u64> for MemoryMb {
    type Error = ValueError;

    fn try_from(mb: u64) -> Result<MemoryMb, ValueError> {
        match NonZeroU64::new(mb) {
            None => Err(ValueError::NotPositive),
            Some(_) if mb > MemoryMb::MAX => Err(ValueError::TooLarge { max: MemoryMb::MAX }),
            Some(mb) => Ok(MemoryMb(mb)),
        }
    }
}

impl From<MemoryMb> for u64 {
    fn from(mb: MemoryMb) -> u64 {
        mb.get()
    }
}

/// A route's `base_url`: an http or https URL with a host, whose origin the route's plugin may
/// reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BaseUrl(String);

impl BaseUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for BaseUrl {
    type Error = ValueError;

    fn try_from(url: String) -> Result<BaseUrl, ValueError> {
        AllowedHosts::from_base_url(&url)?;
        Ok(BaseUrl(url))
    }
}

impl From<BaseUrl> for String {
    fn from(url: BaseUrl) -> String {
        url.0
    }
}

/// One entry of a route's `allowed_hosts`: `host:port` (either scheme) or a URL (its origin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostEntry(String);

impl HostEntry {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for HostEntry {
    type Error = ValueError;

    fn try_from(entry: String) -> Result<HostEntry, ValueError> {
        AllowedHosts::none().add(&entry)?;
        Ok(HostEntry(entry))
    }
}

impl From<HostEntry> for String {
    fn from(entry: HostEntry) -> String {
        entry.0
    }
}

/// `redis_url`: a URL the Redis client accepts (`redis://`, `rediss://`,
/// `redis+unix://`). Checked as it is read, so a typo fails at start rather
/// than at the first limited request. It may hold a password: it is never
/// shown (Debug prints the scheme only).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RedisUrl(String);

impl RedisUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = self.0.split_once("://").map_or("?", |(scheme, _)| scheme);
        write!(f, "RedisUrl({scheme}://…)")
    }
}

impl TryFrom<String> for RedisUrl {
    type Error = ValueError;

    fn try_from(url: String) -> Result<RedisUrl, ValueError> {
        crate::limits::check_redis_url(&url).map_err(|e| ValueError::Redis(e.to_string()))?;
        Ok(RedisUrl(url))
    }
}

impl From<RedisUrl> for String {
    fn from(url: RedisUrl) -> String {
        url.0
    }
}

/// `otlp_endpoint`: the collector's http(s) URL. Spans go to its `/v1/traces` (unless the URL
/// already ends with it, as `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` would).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OtlpEndpoint(String);

impl OtlpEndpoint {
    /// Where the exporter POSTs spans.
    pub fn traces_url(&self) -> String {
        let base = self.0.trim_end_matches('/');
        if base.ends_with("/v1/traces") {
            base.to_owned()
        } else {
            format!("{base}/v1/traces")
        }
    }
}

impl TryFrom<String> for OtlpEndpoint {
    type Error = ValueError;

    fn try_from(url: String) -> Result<OtlpEndpoint, ValueError> {
        let bad = |why: &str| ValueError::Traces(format!("{why} (e.g. \"http://127.0.0.1:4318\")"));
        let parsed = reqwest::Url::parse(&url).map_err(|e| bad(&format!("not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(bad("must be an http or https URL with a host"));
        }
        if parsed.query().is_some() || !parsed.username().is_empty() || parsed.password().is_some()
        {
            return Err(bad(
                "must have no query or credentials (put a collector's auth in otlp_headers)",
            ));
        }
        Ok(OtlpEndpoint(url))
    }
}

impl From<OtlpEndpoint> for String {
    fn from(url: OtlpEndpoint) -> String {
        url.0
    }
}

/// `otlp_headers`: sent with every export. Checked as HTTP headers when read (the exporter
/// would drop a bad one without a word); never shown, as they usually hold a token.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, String>",
    into = "BTreeMap<String, String>"
)]
pub struct OtlpHeaders(BTreeMap<String, String>);

impl OtlpHeaders {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn to_map(&self) -> std::collections::HashMap<String, String> {
        self.0.clone().into_iter().collect()
    }
}

impl std::fmt::Debug for OtlpHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl TryFrom<BTreeMap<String, String>> for OtlpHeaders {
    type Error = ValueError;

    fn try_from(headers: BTreeMap<String, String>) -> Result<OtlpHeaders, ValueError> {
        for (name, value) in &headers {
            if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(ValueError::Traces(format!(
                    "{name:?} is not an HTTP header name"
                )));
            }
            if hyper::header::HeaderValue::from_str(value).is_err() {
                // Not the value: it is likely a token.
                return Err(ValueError::Traces(format!(
                    "the value of {name:?} is not a valid HTTP header value"
                )));
            }
        }
        Ok(OtlpHeaders(headers))
    }
}

impl From<OtlpHeaders> for BTreeMap<String, String> {
    fn from(headers: OtlpHeaders) -> BTreeMap<String, String> {
        headers.0
    }
}

/// `trace_sample_ratio`: the share of new traces exported, from 0 to 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct SampleRatio(f64);

impl SampleRatio {
    pub const ALL: SampleRatio = SampleRatio(1.0);

    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for SampleRatio {
    type Error = ValueError;

    fn try_from(ratio: f64) -> Result<SampleRatio, ValueError> {
        if (0.0..=1.0).contains(&ratio) {
            Ok(SampleRatio(ratio))
        } else {
            Err(ValueError::Traces(
                "must be between 0.0 (none) and 1.0 (every trace)".into(),
            ))
        }
    }
}

impl From<SampleRatio> for f64 {
    fn from(ratio: SampleRatio) -> f64 {
        ratio.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_settings_are_checked_as_they_are_read() {
        let endpoint = |url: &str| OtlpEndpoint::try_from(url.to_owned());
        assert_eq!(
            endpoint("http://127.0.0.1:4318").unwrap().traces_url(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            endpoint("https://collector.example/otlp/")
                .unwrap()
                .traces_url(),
            "https://collector.example/otlp/v1/traces"
        );
        assert_eq!(
            endpoint("http://c:4318/v1/traces").unwrap().traces_url(),
            "http://c:4318/v1/traces"
        );
        for bad in [
            "127.0.0.1:4318",
            "grpc://c:4317",
            "http://u:p@c:4318",
            "http://c/?k=v",
        ] {
            assert!(endpoint(bad).is_err(), "{bad}");
        }
        let headers = |pairs: &[(&str, &str)]| {
            OtlpHeaders::try_from(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        assert!(headers(&[("authorization", "Bearer t")]).is_ok());
        let bad = headers(&[("authorization", "Bearer secret\n")]).unwrap_err();
        assert!(!bad.to_string().contains("secret"), "{bad}");
        assert!(headers(&[("bad name", "v")]).is_err());
        let shown = format!("{:?}", headers(&[("x-token", "secret")]).unwrap());
        assert!(!shown.contains("secret"), "{shown}");
        assert_eq!(SampleRatio::try_from(0.25).map(SampleRatio::get), Ok(0.25));
        for bad in [-0.1, 1.5, f64::NAN] {
            assert!(SampleRatio::try_from(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_is_between_one_mib_and_the_engine_reservation() {
        assert_eq!(MemoryMb::try_from(0), Err(ValueError::NotPositive));
        assert_eq!(
            MemoryMb::try_from(MemoryMb::MAX + 1),
            Err(ValueError::TooLarge { max: MemoryMb::MAX })
        );
        let most = MemoryMb::try_from(MemoryMb::MAX).expect("the maximum is allowed");
        assert_eq!(most.bytes(), MAX_MEMORY_LIMIT_BYTES);
    }

    #[test]
    fn redis_urls_are_checked_and_not_shown() {
        let url = RedisUrl::try_from("redis://:hunter2@127.0.0.1:6379/1".to_owned())
            .expect("a redis URL");
        assert!(!format!("{url:?}").contains("hunter2"));
        assert!(RedisUrl::try_from("http://127.0.0.1:6379".to_owned()).is_err());
        assert!(RedisUrl::try_from("not a url".to_owned()).is_err());
    }

    #[test]
    fn hosts_are_checked_as_the_sandbox_checks_them() {
        assert!(BaseUrl::try_from("https://api.example.com/v1".to_owned()).is_ok());
        assert!(BaseUrl::try_from("ftp://example.com".to_owned()).is_err());
        assert!(BaseUrl::try_from("not a url".to_owned()).is_err());
        assert!(HostEntry::try_from("example.com:8443".to_owned()).is_ok());
        assert!(HostEntry::try_from("http://example.com".to_owned()).is_ok());
        assert!(HostEntry::try_from("ftp://example.com".to_owned()).is_err());
    }
}
