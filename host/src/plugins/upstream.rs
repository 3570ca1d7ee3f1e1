//! A route's upstream side, as its sandbox holds it: the connection pools its plugins'
//! requests go over (one per serving thread) and the URLs they ask for, parsed once. The
//! `http` import ([`super::imports`]) sends through it; the policy ([`super::policy`])
//! builds it with the route's limits.
//!
//! The pools are hyper-util's client, the one reqwest wraps, used directly: a plugin's request
//! needs none of reqwest's layers (redirects, retries as a tower service, body decoders), and
//! going without them saves converting each URL again and a boxed service stack per request.
//! What reqwest's defaults gave that matters here is kept: TCP keepalive and no Nagle delay,
//! the platform's certificate verifier, `h2` offered by ALPN, `Accept: */*`, credentials in a
//! URL sent as basic auth, and a resend of a small request an HTTP/2 upstream refused before
//! reading it ([`Upstream::send`]). When the
//! environment names a proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`), the pools are
//! reqwest's, which implements them (`CONNECT` tunnels, `NO_PROXY`, credentials).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::policy::Limits;

/// Idle upstream connections a worker keeps per route (and upstream host).
const MAX_IDLE_CONNECTIONS: usize = 64;
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Bodies up to this size are kept until the answer comes, to send again should an HTTP/2
/// upstream refuse the stream before reading it. A larger one is freed as soon as it is
/// written rather than kept for a minute (a slow model): its upstream body costs its size
/// only while it is being sent. The gateway's own retries ([`crate::flow`]) stay, from the
/// request it holds.
const RESENDABLE_BODY_BYTES: usize = 64 * 1024;

/// Sends of one request an HTTP/2 upstream may refuse before it is given up (reqwest's
/// default: the first and two more).
const MAX_SENDS: u32 = 3;

/// A route's connection pool on one thread; cloning it is cheap (one reference count: the
/// client itself is ~340 bytes of handles, each counted).
#[derive(Clone, Debug)]
pub(super) enum PooledClient {
    Direct(Arc<Client<HttpsConnector<HttpConnector>, Full<Bytes>>>),
    Proxied(reqwest::Client),
}

/// The response's head, and its body to be read chunk by chunk.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: http::StatusCode,
    pub(super) headers: http::HeaderMap,
    pub(super) body: AnswerBody,
}

#[derive(Debug)]
pub(super) enum AnswerBody {
    Direct(Incoming),
    Proxied(reqwest::Response),
}

impl AnswerBody {
    /// The next piece of the body; `None` at its end.
    pub(super) async fn chunk(&mut self) -> Result<Option<Bytes>, SendError> {
        match self {
            AnswerBody::Direct(body) => loop {
                match body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(describe(&e)),
                    // Trailers carry nothing a plugin reads.
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                }
            },
            AnswerBody::Proxied(response) => response.chunk().await.map_err(reqwest_error),
        }
    }
}

/// Why a route's connection pools could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("TLS: {0}")]
    Tls(String),
    #[error(transparent)]
    Proxied(#[from] reqwest::Error),
}

/// A route's upstream connections and the URLs its plugins ask for.
#[derive(Debug)]
pub(super) struct Upstream {
    limits: Limits,
    /// The route's connection pool for threads that are not serving workers.
    shared_client: PooledClient,
    /// One pool per serving thread ([`crate::worker`]), built on first use, so a
    /// request's upstream connection lives on the thread that serves it. Sized
    /// by the first worker to ask: each worker knows how many there are.
    worker_clients: OnceLock<Box<[OnceLock<PooledClient>]>>,
    recent_urls: RecentUrls,
}

/// A URL a plugin asked for, in the forms the import needs: `url` for the policy's host
/// check, `uri` for the client (without credentials), and the credentials the URL carried as
/// an `Authorization: Basic` value (as reqwest sent them; a header the plugin sets wins).
#[derive(Clone)]
pub(super) struct Target {
    pub(super) url: url::Url,
    uri: http::Uri,
    pub(super) basic_auth: Option<http::HeaderValue>,
}

/// What [`Upstream::send`] sends: `uri` comes from a [`Target`].
pub(super) struct Outgoing {
    pub(super) method: http::Method,
    pub(super) headers: http::HeaderMap,
    pub(super) body: Vec<u8>,
}

/// Why a send or a body read failed, and whether it was a timeout.
#[derive(Debug)]
pub(super) struct SendError {
    pub(super) timed_out: bool,
    /// The error and its causes, joined; never a URL (hyper's errors carry none).
    pub(super) message: String,
}

impl Upstream {
    pub(super) fn new(limits: &Limits) -> Result<Upstream, ClientError> {
        Ok(Upstream {
            limits: *limits,
            shared_client: build_client(limits)?,
            worker_clients: OnceLock::new(),
            recent_urls: RecentUrls::default(),
        })
    }

    /// `text` as a target, parsed once for the route's recent URLs.
    pub(super) fn parse_url(&self, text: &str) -> Result<Target, String> {
        self.recent_urls.parse(text)
    }

    /// Sends `outgoing` to `target` and waits for the response's head, resending a small
    /// request that an HTTP/2 upstream refused (`REFUSED_STREAM`) or whose connection it was
    /// closing gracefully (`GOAWAY` with `NO_ERROR`) before reading it: both say the request
    /// was not processed (RFC 9113, 8.7).
    pub(super) async fn send(
        client: PooledClient,
        target: Target,
        outgoing: Outgoing,
    ) -> Result<Answer, SendError> {
        let client = match client {
            PooledClient::Direct(client) => client,
            PooledClient::Proxied(client) => return send_proxied(client, target, outgoing).await,
        };
        let request = |body: Bytes| {
            let mut request = hyper::Request::new(Full::new(body));
            *request.method_mut() = outgoing.method.clone();
            *request.uri_mut() = target.uri.clone();
            *request.headers_mut() = outgoing.headers.clone();
            request
        };
        let body = Bytes::from(outgoing.body);
        let response = if body.len() > RESENDABLE_BODY_BYTES {
            client
                .request(request(body))
                .await
                .map_err(|e| describe(&e))?
        } else {
            let mut sends = 1;
            loop {
                match client.request(request(body.clone())).await {
                    Ok(response) => break response,
                    Err(e) if sends < MAX_SENDS && refused_unprocessed(&e) => sends += 1,
                    Err(e) => return Err(describe(&e)),
                }
            }
        };
        let (head, body) = response.into_parts();
        Ok(Answer {
            status: head.status,
            headers: head.headers,
            body: AnswerBody::Direct(body),
        })
    }

    /// The calling thread's client (a cheap handle to its pool).
    pub(super) fn client(&self) -> PooledClient {
        let Some(worker) = crate::worker::current() else {
            return self.shared_client.clone();
        };
        let slot = self
            .worker_clients
            .get_or_init(|| (0..worker.count).map(|_| OnceLock::new()).collect())
            .get(worker.index);
        let Some(slot) = slot else {
            return self.shared_client.clone();
        };
        if let Some(client) = slot.get() {
            return client.clone();
        }
        match build_client(&self.limits) {
            Ok(client) => slot.get_or_init(|| client).clone(),
            // The same settings built the shared client; should this fail now, share it.
            Err(_) => self.shared_client.clone(),
        }
    }
}

/// Whether `error` is an HTTP/2 upstream saying it did not process the request.
fn refused_unprocessed(error: &hyper_util::client::legacy::Error) -> bool {
    causes(error).any(|cause| {
        cause.downcast_ref::<h2::Error>().is_some_and(|e| {
            e.is_remote()
                && ((e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM))
                    || (e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR)))
        })
    })
}

fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| e.source())
}

/// Through reqwest, which resends what an HTTP/2 upstream refused by itself.
async fn send_proxied(
    client: reqwest::Client,
    target: Target,
    outgoing: Outgoing,
) -> Result<Answer, SendError> {
    let body = if outgoing.body.len() <= RESENDABLE_BODY_BYTES {
        reqwest::Body::from(outgoing.body)
    } else {
        // Not kept for a resend: freed once written.
        reqwest::Body::wrap(Full::new(Bytes::from(outgoing.body)))
    };
    let mut response = client
        .request(outgoing.method, target.url)
        .headers(outgoing.headers)
        .body(body)
        .send()
        .await
        .map_err(reqwest_error)?;
    Ok(Answer {
        status: response.status(),
        headers: std::mem::take(response.headers_mut()),
        body: AnswerBody::Proxied(response),
    })
}

/// A reqwest error without its URL: plugin URLs may carry keys in their query.
fn reqwest_error(error: reqwest::Error) -> SendError {
    let error = error.without_url();
    let mut described = describe(&error);
    described.timed_out |= error.is_timeout();
    described
}

/// `error` with its causes ("client error (Connect): tcp connect error: Connection refused"):
/// hyper's own message alone says only which step failed.
pub(super) fn describe(error: &(dyn std::error::Error + 'static)) -> SendError {
    let mut message = String::new();
    let mut timed_out = false;
    for cause in causes(error) {
        timed_out |= cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut);
        let text = cause.to_string();
        // Some errors repeat their source's text in their own.
        if !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
    }
    SendError { timed_out, message }
}

/// The TLS settings every pool shares: the platform's verifier (as reqwest set it up) reads
/// the system's roots once for the process rather than once per pool.
fn tls_config() -> Result<rustls::ClientConfig, ClientError> {
    static CONFIG: OnceLock<Result<rustls::ClientConfig, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            // Built without a default TLS provider; this process uses ring.
            let provider = rustls::crypto::CryptoProvider::get_default()
                .cloned()
                .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
            let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
                .map_err(|e| e.to_string())?;
            Ok(rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth())
        })
        .clone()
        .map_err(ClientError::Tls)
}

/// Whether the environment names a proxy for outbound requests (read once).
fn proxied() -> bool {
    static PROXIED: OnceLock<bool> = OnceLock::new();
    *PROXIED.get_or_init(|| {
        [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
    })
}

fn build_client(limits: &Limits) -> Result<PooledClient, ClientError> {
    if proxied() {
        // No redirects: a redirect could lead outside the allowed hosts.
        return Ok(PooledClient::Proxied(
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(limits.connect_timeout)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
                .build()?,
        ));
    }
    let connector = connector(limits)?;
    // hyper-util's client follows no redirects (one could lead outside the allowed hosts).
    Ok(PooledClient::Direct(Arc::new(
        Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            // Kept-alive connections beyond this are closed when a burst ends
            // instead of each holding its buffers (~30 KiB) for the idle timeout.
            .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
            .build(connector),
    )))
}

/// How a direct pool connects: TCP with reqwest's settings, then TLS where the URL says https.
fn connector(limits: &Limits) -> Result<HttpsConnector<HttpConnector>, ClientError> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(limits.connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(15)));
    http.set_keepalive_interval(Some(Duration::from_secs(15)));
    http.set_keepalive_retries(Some(3));
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config()?)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http))
}

/// The last URLs the route's plugins asked for, parsed: plugins call the same
/// few over and over, and parsing one (host normalization included) cost ~3%
/// of a request's CPU.
#[derive(Default)]
struct RecentUrls(std::sync::Mutex<Vec<(String, Target)>>);

impl RecentUrls {
    const KEPT: usize = 8;

    fn parse(&self, text: &str) -> Result<Target, String> {
        let mut recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, target)) = recent.iter().find(|(seen, _)| seen == text) {
            return Ok(target.clone());
        }
        let url = url::Url::parse(text).map_err(|e| e.to_string())?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{} is not an HTTP scheme", url.scheme()));
        }
        let basic_auth = basic_auth(&url)?;
        let mut sent = url.clone();
        if basic_auth.is_some() {
            // Both only fail for a URL without a host, which http(s) URLs never are.
            let _ = sent.set_username("");
            let _ = sent.set_password(None);
        }
        // The normalized text: what the host check reads is what is sent.
        let uri = sent
            .as_str()
            .parse::<http::Uri>()
            .map_err(|e| e.to_string())?;
        let target = Target {
            url,
            uri,
            basic_auth,
        };
        if recent.len() == Self::KEPT {
            recent.remove(0);
        }
        recent.push((text.to_owned(), target.clone()));
        Ok(target)
    }
}

/// The `Authorization: Basic` value of the credentials in `url`, if it has any.
fn basic_auth(url: &url::Url) -> Result<Option<http::HeaderValue>, String> {
    use base64::Engine as _;
    if url.username().is_empty() && url.password().is_none() {
        return Ok(None);
    }
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|text| text.into_owned())
            .map_err(|_| "the credentials in the URL are not UTF-8".to_owned())
    };
    let credentials = format!(
        "{}:{}",
        decode(url.username())?,
        decode(url.password().unwrap_or(""))?
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
    let mut value =
        http::HeaderValue::try_from(format!("Basic {encoded}")).map_err(|e| e.to_string())?;
    value.set_sensitive(true);
    Ok(Some(value))
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

    /// A POST of `size` bytes.
    fn outgoing(size: usize) -> Outgoing {
        Outgoing {
            method: http::Method::POST,
            headers: http::HeaderMap::new(),
            body: vec![b'x'; size],
        }
    }

    #[test]
    fn recent_urls_are_parsed_once_and_bounded() {
        let recent = RecentUrls::default();
        let target = recent
            .parse("http://127.0.0.1:9/v1/chat/completions")
            .unwrap();
        assert_eq!(target.url.path(), "/v1/chat/completions");
        assert_eq!(target.uri.path(), "/v1/chat/completions");
        assert_eq!(recent.parse(target.url.as_str()).unwrap().url, target.url);
        for port in 0..20 {
            recent.parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        }
        assert_eq!(recent.0.lock().unwrap().len(), RecentUrls::KEPT);
        assert!(recent.parse("not a url").is_err());
        assert!(recent.parse("ftp://127.0.0.1/").is_err());
    }

    #[test]
    fn credentials_in_a_url_are_sent_as_basic_auth_and_not_in_the_uri() {
        let recent = RecentUrls::default();
        let target = recent
            .parse("http://us%40er:p%3Ass@127.0.0.1:9/v1")
            .unwrap();
        assert_eq!(target.uri.to_string(), "http://127.0.0.1:9/v1");
        // base64("us@er:p:ss")
        assert_eq!(
            target.basic_auth.unwrap().to_str().unwrap(),
            "Basic dXNAZXI6cDpzcw=="
        );
        assert!(
            recent
                .parse("http://127.0.0.1:9/v1")
                .unwrap()
                .basic_auth
                .is_none()
        );
    }

    #[test]
    fn the_uri_sent_is_the_normalized_url_the_host_check_read() {
        let recent = RecentUrls::default();
        let target = recent.parse("HTTP://Example.COM:80/a/../v1?q=1").unwrap();
        assert_eq!(target.url.host_str(), Some("example.com"));
        assert_eq!(target.uri.host(), Some("example.com"));
        assert_eq!(target.uri.to_string(), "http://example.com/v1?q=1");
    }

    #[tokio::test]
    async fn a_refused_connection_is_told_with_its_cause() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = format!("http://{}/v1", listener.local_addr().unwrap());
        drop(listener);
        let upstream = Upstream::new(&Limits::default()).unwrap();
        let target = upstream.parse_url(&closed).unwrap();
        let error = Upstream::send(upstream.client(), target, outgoing(2))
            .await
            .unwrap_err();
        assert!(!error.timed_out, "{error:?}");
        assert!(error.message.contains("onnect"), "{}", error.message);
        assert!(!error.message.contains("127.0.0.1"), "{}", error.message);
    }

    #[test]
    fn a_timed_out_cause_makes_a_timeout_and_every_cause_is_told_once() {
        #[derive(Debug)]
        struct Connect(std::io::Error);
        impl std::fmt::Display for Connect {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tcp connect error")
            }
        }
        impl std::error::Error for Connect {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let timed_out = Connect(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "timed out",
        ));
        let told = describe(&timed_out);
        assert!(told.timed_out);
        assert_eq!(told.message, "tcp connect error: timed out");
        let refused = Connect(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let told = describe(&refused);
        assert!(!told.timed_out);
        assert_eq!(told.message, "tcp connect error: connection refused");
    }

    #[tokio::test]
    async fn a_small_request_an_http2_upstream_refused_unread_is_sent_again() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let streams = Arc::new(AtomicUsize::new(0));
        let seen = streams.clone();
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let mut connection = h2::server::handshake(socket).await.unwrap();
            // Every other stream is refused, starting with the first.
            while let Some(Ok((_request, mut respond))) = connection.accept().await {
                if seen.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                } else {
                    let _ = respond.send_response(http::Response::new(()), true);
                }
            }
        });
        // HTTP/2 without TLS (prior knowledge), which a route's pools never speak.
        let client = PooledClient::Direct(Arc::new(
            Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build(connector(&Limits::default()).unwrap()),
        ));
        let target = RecentUrls::default().parse(&base).unwrap();

        let answer = Upstream::send(client.clone(), target.clone(), outgoing(100))
            .await
            .unwrap();
        assert_eq!(answer.status, http::StatusCode::OK);
        assert_eq!(streams.load(Ordering::SeqCst), 2);

        // A large body is not kept for a resend: the refusal is the answer.
        let error = Upstream::send(client, target, outgoing(RESENDABLE_BODY_BYTES + 1))
            .await
            .unwrap_err();
        assert_eq!(streams.load(Ordering::SeqCst), 3);
        assert!(!error.timed_out);
        assert!(error.message.contains("refused"), "{}", error.message);
    }
}
