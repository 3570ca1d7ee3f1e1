//! A route's upstream side, as its sandbox holds it: the connection pools its plugins'
//! requests go over (one per serving thread) and the URLs they ask for, parsed once. The
//! `http` import ([`super::imports`]) sends through it; the policy ([`super::policy`])
//! builds it with the route's limits.

use std::sync::OnceLock;
use std::time::Duration;

use super::policy::Limits;

/// Idle upstream connections a worker keeps per route (and upstream host).
const MAX_IDLE_CONNECTIONS: usize = 64;

/// A route's upstream connections and the URLs its plugins ask for.
#[derive(Debug)]
pub(super) struct Upstream {
    limits: Limits,
    /// The route's connection pool for threads that are not serving workers.
    shared_client: reqwest::Client,
    /// One pool per serving thread ([`crate::worker`]), built on first use, so a
    /// request's upstream connection lives on the thread that serves it. Sized
    /// by the first worker to ask: each worker knows how many there are.
    worker_clients: OnceLock<Box<[OnceLock<reqwest::Client>]>>,
    recent_urls: RecentUrls,
}

impl Upstream {
    pub(super) fn new(limits: &Limits) -> reqwest::Result<Upstream> {
        // reqwest is built without a default TLS provider; this process uses ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Upstream {
            limits: *limits,
            shared_client: build_client(limits)?,
            worker_clients: OnceLock::new(),
            recent_urls: RecentUrls::default(),
        })
    }

    /// `text` as a URL, parsed once for the route's recent URLs.
    pub(super) fn parse_url(&self, text: &str) -> Result<reqwest::Url, String> {
        self.recent_urls.parse(text)
    }

    /// The calling thread's client.
    pub(super) fn client(&self) -> &reqwest::Client {
        let Some(worker) = crate::worker::current() else {
            return &self.shared_client;
        };
        let slot = self
            .worker_clients
            .get_or_init(|| (0..worker.count).map(|_| OnceLock::new()).collect())
            .get(worker.index);
        let Some(slot) = slot else {
            return &self.shared_client;
        };
        if let Some(client) = slot.get() {
            return client;
        }
        match build_client(&self.limits) {
            Ok(client) => slot.get_or_init(|| client),
            // The same settings built the shared client; should this fail now, share it.
            Err(_) => &self.shared_client,
        }
    }
}

fn build_client(limits: &Limits) -> reqwest::Result<reqwest::Client> {
    // No redirects: a redirect could lead outside the allowed hosts.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(limits.connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        // Kept-alive connections beyond this are closed when a burst ends
        // instead of each holding its buffers (~30 KiB) for the idle timeout.
        .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
        .build()
}

/// The last URLs the route's plugins asked for, parsed: plugins call the same
/// few over and over, and parsing one (host normalization included) cost ~3%
/// of a request's CPU.
#[derive(Default)]
struct RecentUrls(std::sync::Mutex<Vec<(String, reqwest::Url)>>);

impl RecentUrls {
    const KEPT: usize = 8;

    fn parse(&self, text: &str) -> Result<reqwest::Url, String> {
        let mut recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, url)) = recent.iter().find(|(seen, _)| seen == text) {
            return Ok(url.clone());
        }
        let url = reqwest::Url::parse(text).map_err(|e| e.to_string())?;
        if recent.len() == Self::KEPT {
            recent.remove(0);
        }
        recent.push((text.to_owned(), url.clone()));
        Ok(url)
    }
}

impl std::fmt::Debug for RecentUrls {
    // URLs may carry keys in their query: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecentUrls")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_urls_are_parsed_once_and_bounded() {
        let recent = RecentUrls::default();
        let url = recent
            .parse("http://127.0.0.1:9/v1/chat/completions")
            .unwrap();
        assert_eq!(url.path(), "/v1/chat/completions");
        assert_eq!(recent.parse(url.as_str()).unwrap(), url);
        for port in 0..20 {
            recent.parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        }
        assert_eq!(recent.0.lock().unwrap().len(), RecentUrls::KEPT);
        assert!(recent.parse("not a url").is_err());
    }
}
