//! The notification stream a remote server keeps open to the gateway, so that a change of its
//! tools reaches `/mcp`'s callers before `tools_list_ttl_secs` runs out: the session era's
//! `GET` stream of the session, or the stateless revision's `subscriptions/listen` with
//! `toolsListChanged`. Opened once the server's era is found, and only for a server that
//! announces changes (`tools.listChanged`); held by one task per server, opened again after
//! a dropped stream, ended with the server or its session.
//!
//! What the gateway does not hear while no stream is open it cannot know: each new stream
//! drops the kept list first.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::link::{Link, SseEvents, describe};
use super::{Tool, wire};

/// A server's tool list as the gateway keeps it, and since when.
pub(super) struct Listed {
    pub tools: Arc<[Tool]>,
    pub at: Instant,
}

impl Listed {
    pub fn now(tools: Arc<[Tool]>) -> Listed {
        Listed {
            tools,
            at: Instant::now(),
        }
    }
}

/// The kept tool list, shared with the listener, which drops it when the server says it
/// changed.
pub(super) type KeptList = Mutex<Option<Listed>>;

/// Drops the kept list of `listed`.
pub(super) fn forget(listed: &KeptList) {
    *listed.lock().unwrap_or_else(PoisonError::into_inner) = None;
}

/// The stream a server keeps for its era.
#[derive(Debug)]
pub(super) enum Opens {
    /// The session era's: a `GET` in the session.
    SessionStream { version: String, session: String },
    /// The stateless revision's: `subscriptions/listen`.
    Subscription,
}

/// The wait before a dropped stream is opened again, doubled after each stream that did not
/// last, up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(1);
const MAX_WAIT: Duration = Duration::from_secs(60);
/// A stream open this long was a good one: the next wait starts again from [`FIRST_WAIT`].
const LASTED: Duration = Duration::from_secs(30);
/// The id of the stateless revision's `subscriptions/listen` request: the stream's
/// notifications carry it as their subscription id.
const LISTEN_ID: &str = "gateway-listen";

/// Starts listening to the server of `link` on the stream it `opens`; `listed` is the list
/// its changes drop.
pub(super) fn spawn(
    link: Arc<Link>,
    opens: Opens,
    listed: &Arc<KeptList>,
) -> tokio::task::AbortHandle {
    let listened = Listener {
        link,
        opens,
        listed: Arc::downgrade(listed),
    };
    tokio::spawn(listened.run()).abort_handle()
}

struct Listener {
    link: Arc<Link>,
    opens: Opens,
    /// Gone once the server is: the listener ends with it.
    listed: Weak<KeptList>,
}

/// How a stream ended.
enum Ended {
    /// The server keeps no such stream (405, a JSON answer, an error): the list is kept for
    /// its TTL alone.
    Refused(String),
    /// The session is gone (404): the next request begins another, and its listener.
    SessionGone,
    /// The stream dropped, or could not be opened: opened again after a wait.
    Dropped(String),
    /// The server is gone.
    Unused,
}

impl Listener {
    async fn run(self) {
        let id = self.link.id.clone();
        let mut wait = FIRST_WAIT;
        loop {
            let opened = Instant::now();
            match self.stream().await {
                Ended::Refused(why) => {
                    tracing::info!(server = %id, "no notification stream ({why}): its tool list is kept for tools_list_ttl_secs");
                    return;
                }
                Ended::SessionGone | Ended::Unused => return,
                Ended::Dropped(why) => {
                    tracing::debug!(server = %id, "notification stream dropped: {why}");
                }
            }
            if opened.elapsed() >= LASTED {
                wait = FIRST_WAIT;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_WAIT);
        }
    }

    /// Opens the stream and reads it until it ends.
    async fn stream(&self) -> Ended {
        let request = match &self.opens {
            Opens::SessionStream { version, session } => self.link.get(version, session),
            Opens::Subscription => {
                let body = json!({"jsonrpc": "2.0", "id": LISTEN_ID, "method": wire::LISTEN,
                    "params": {"_meta": wire::modern_meta(None),
                               "notifications": {"toolsListChanged": true}}});
                self.link
                    .post(&body, None, Some(wire::MODERN_VERSION), None)
                    .header(wire::METHOD_HEADER, wire::LISTEN)
            }
        };
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Ended::Dropped(describe(&e)),
        };
        let status = response.status().as_u16();
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        match status {
            200 if is_sse => {}
            404 if matches!(self.opens, Opens::SessionStream { .. }) => return Ended::SessionGone,
            // The server still holds the last stream of the session open (the TypeScript
            // SDK allows one): it lets it go in time.
            409 => return Ended::Dropped("HTTP 409".into()),
            405 | 200..=299 | 400..=499 => return Ended::Refused(format!("HTTP {status}")),
            _ => return Ended::Dropped(format!("HTTP {status}")),
        }
        let Some(listed) = self.listed.upgrade() else {
            return Ended::Unused;
        };
        // What changed while no stream was open is unknown.
        forget(&listed);
        drop(listed);
        tracing::debug!(server = %self.link.id, "notification stream open");
        let mut events = SseEvents::default();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return Ended::Dropped("the server closed it".into()),
                Err(e) => return Ended::Dropped(describe(&e)),
            };
            for data in events.push(&chunk) {
                let Ok(message) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if message.get("method").and_then(Value::as_str) == Some(wire::TOOLS_CHANGED) {
                    let Some(listed) = self.listed.upgrade() else {
                        return Ended::Unused;
                    };
                    tracing::debug!(server = %self.link.id, "tool list changed");
                    forget(&listed);
                }
                // The answer to `subscriptions/listen` ends the subscription (the server's
                // graceful close); an error answer is a refusal, logged by its code alone (its
                // message could echo the server's credentials).
                if message.get("id").and_then(Value::as_str) == Some(LISTEN_ID) {
                    return match message.get("error") {
                        Some(error) => Ended::Refused(format!(
                            "subscriptions/listen answered error {}",
                            error.get("code").unwrap_or(&Value::Null)
                        )),
                        None => Ended::Dropped("the server ended the subscription".into()),
                    };
                }
            }
            if events.pending() > self.link.max_answer_bytes {
                return Ended::Dropped(format!(
                    "an event over {} bytes (max_tool_result_bytes)",
                    self.link.max_answer_bytes
                ));
            }
            if self.listed.strong_count() == 0 {
                return Ended::Unused;
            }
        }
    }
}
