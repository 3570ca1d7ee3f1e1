//! Change notifications: `NOTIFY gateway_changes` in the transaction of a key change, and the
//! listener that turns each into a new [`Changes`] epoch on every replica.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::{AsyncMessage, Client, Config, Connection, NoTls};

use super::connect::Tls;
use crate::causes::with_causes;
use crate::store::StoreError;
use crate::store::key_cache::Changes;

/// The channel of change notifications; the payload names what changed.
const CHANNEL: &str = "gateway_changes";
pub(super) const KEYS_CHANGED: &str = "keys";
/// An admin console session was signed out.
pub(super) const SESSIONS_CHANGED: &str = "sessions";
/// Even with the listener connected every cached key is dropped this often:
/// a notification can be lost (a connection half-dead without an error).
const FULL_REFRESH: Duration = Duration::from_secs(30);
const LISTEN_RETRY_MIN: Duration = Duration::from_millis(100);
const LISTEN_RETRY_MAX: Duration = Duration::from_secs(3);

/// Tells every listener that `what` changed, when the transaction commits.
pub(super) async fn notify(
    tx: &deadpool_postgres::Transaction<'_>,
    what: &str,
) -> Result<(), StoreError> {
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &what])
        .await?;
    Ok(())
}

/// Keeps a connection subscribed to change notifications, for as long as the
/// backend's runtime runs.
pub(super) async fn listen(mut config: Config, tls: Tls, changes: Arc<Changes>) {
    let name = config
        .get_application_name()
        .unwrap_or("gateway")
        .to_owned();
    // Named so that operators (and tests) can tell it from the pool's connections.
    config.application_name(format!("{name} (changes)"));
    let mut retry = LISTEN_RETRY_MIN;
    let mut outage_logged = false;
    loop {
        let mut subscribed = false;
        let ended = match &tls {
            Tls::Plain => match config.connect(NoTls).await {
                Ok((client, connection)) => {
                    listen_on(client, connection, &changes, &mut subscribed).await
                }
                Err(e) => Err(e),
            },
            Tls::Rustls(tls) => match config.connect(tls.clone()).await {
                Ok((client, connection)) => {
                    listen_on(client, connection, &changes, &mut subscribed).await
                }
                Err(e) => Err(e),
            },
        };
        changes.set_connected(false);
        if subscribed {
            retry = LISTEN_RETRY_MIN;
            outage_logged = false;
        }
        if !outage_logged {
            let why = match &ended {
                Ok(()) => "the connection was closed".to_owned(),
                Err(e) => with_causes(e),
            };
            tracing::warn!(
                "PostgreSQL change notifications are not received ({why}); until they are, \
                 every key lookup reads the database"
            );
            outage_logged = true;
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LISTEN_RETRY_MAX);
    }
}

/// Subscribes on one connection and turns its notifications into new epochs
/// until it fails.
async fn listen_on<S, T>(
    client: Client,
    mut connection: Connection<S, T>,
    changes: &Changes,
    subscribed: &mut bool,
) -> Result<(), tokio_postgres::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    let listen = format!("LISTEN {CHANNEL}");
    let subscribe = client.batch_execute(&listen);
    tokio::pin!(subscribe);
    // The connection does the LISTEN's I/O only while it is polled.
    loop {
        tokio::select! {
            done = &mut subscribe => {
                done?;
                break;
            }
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
        }
    }
    changes.set_connected(true);
    *subscribed = true;
    tracing::info!("PostgreSQL change notifications are received");
    let mut refresh =
        tokio::time::interval_at(tokio::time::Instant::now() + FULL_REFRESH, FULL_REFRESH);
    loop {
        tokio::select! {
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    tracing::debug!("PostgreSQL: {} changed", notification.payload());
                    changes.changed();
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            _ = refresh.tick() => changes.changed(),
        }
    }
}
