//! What a route's plugin instances may do: the hosts they may reach
//! ([`AllowedHosts`]) and what one call may consume ([`Limits`]). Rules only: the config
//! checks its values with them, and the [`super::Sandbox`] carries them with the route's
//! upstream connections.

use std::time::Duration;

/// The largest memory limit a route may set; also the pooling allocator's slot size.
pub const MAX_MEMORY_LIMIT_BYTES: usize = 1024 * 1024 * 1024;

/// What one plugin call may consume. Each route has its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: usize,
    /// CPU time inside the plugin; time spent waiting in host calls does not count.
    pub cpu_time: Duration,
    pub connect_timeout: Duration,
    /// Until the upstream's response headers.
    pub first_byte_timeout: Duration,
    /// Between two chunks of an upstream body.
    pub idle_timeout: Duration,
    pub max_response_bytes: u64,
    /// Outbound requests one call may make.
    pub max_http_requests: u32,
    /// What the route's `kv` space may hold.
    pub kv: super::kv::KvBounds,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 64 * 1024 * 1024,
            cpu_time: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_response_bytes: 64 * 1024 * 1024,
            max_http_requests: 32,
            kv: super::kv::KvBounds::default(),
        }
    }
}

impl Limits {
    /// These limits with a memory limit and a CPU budget of its own where one is set (a
    /// guard's, a tool plugin's).
    pub fn with(self, memory_bytes: Option<usize>, cpu_time: Option<Duration>) -> Limits {
        Limits {
            memory_bytes: memory_bytes.unwrap_or(self.memory_bytes),
            cpu_time: cpu_time.unwrap_or(self.cpu_time),
            ..self
        }
    }
}

/// Why an entry of a route's allowed hosts (or its `base_url`) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostsError {
    #[error("not a URL ({0})")]
    NotAUrl(String),
    #[error("only http and https URLs are allowed")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    #[error("the URL has no port")]
    NoPort,
}

/// The hosts a route's plugin may reach: those of its `base_url`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    origins: Vec<(String, String, u16)>,
}

impl AllowedHosts {
    pub fn none() -> AllowedHosts {
        AllowedHosts::default()
    }

    pub fn from_base_url(base_url: &str) -> Result<AllowedHosts, HostsError> {
        let url = url::Url::parse(base_url).map_err(|e| HostsError::NotAUrl(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(HostsError::Scheme);
        }
        let host = url.host_str().ok_or(HostsError::NoHost)?;
        let port = url.port_or_known_default().ok_or(HostsError::NoPort)?;
        Ok(AllowedHosts {
            origins: vec![(url.scheme().to_owned(), host.to_ascii_lowercase(), port)],
        })
    }

    /// Adds `host:port`, or the origin of a URL.
    pub fn add(&mut self, entry: &str) -> Result<(), HostsError> {
        let url = if entry.contains("://") {
            entry.to_owned()
        } else {
            format!("https://{entry}")
        };
        let mut extra = AllowedHosts::from_base_url(&url)?;
        if !entry.contains("://") {
            // A bare host:port allows both schemes.
            let (_, host, port) = extra.origins[0].clone();
            extra.origins.push(("http".to_owned(), host, port));
        }
        self.origins.append(&mut extra.origins);
        Ok(())
    }

    pub fn permits(&self, url: &url::Url) -> bool {
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        self.origins.iter().any(|(scheme, allowed, allowed_port)| {
            scheme == url.scheme() && allowed.eq_ignore_ascii_case(host) && *allowed_port == port
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_base_url_origin_is_allowed() {
        let allowed = AllowedHosts::from_base_url("https://api.openai.com/v1").unwrap();
        let ok = |u: &str| allowed.permits(&url::Url::parse(u).unwrap());
        assert!(ok("https://api.openai.com/v1/chat/completions"));
        assert!(ok("https://API.openai.com:443/v1/embeddings"));
        assert!(!ok("http://api.openai.com/v1/chat/completions"));
        assert!(!ok("https://api.openai.com:8443/v1"));
        assert!(!ok("https://evil.example/v1"));
        assert!(!ok("https://api.openai.com.evil.example/v1"));
        assert!(!AllowedHosts::none().permits(&url::Url::parse("http://127.0.0.1/").unwrap()));
        assert!(AllowedHosts::from_base_url("ftp://x/").is_err());
    }
}
